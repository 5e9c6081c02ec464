package throttle

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// RetryPolicy says which failed requests [Transport] sends again, and when.
// The zero value is the default policy described on each field.
//
// What is retried:
//   - 429 Too Many Requests, for any method: the server did not process
//     the request.
//   - 502, 503 and 504, and transport errors that are transient
//     (connection refused or reset, timeouts, a connection closed before
//     the response), only for requests net/http would replay: an idempotent
//     method (GET, HEAD, OPTIONS, TRACE, PUT, DELETE) or an Idempotency-Key
//     header.
//   - Never a request whose body cannot be sent again: it needs no body or
//     a GetBody (http.NewRequest sets it for bytes, strings and their
//     readers).
//
// When: after the server's Retry-After (or the reset of an exhausted quota)
// when the response gives one, else after a jittered exponential backoff
// (cenkalti/backoff/v4: InitialInterval × Multiplier^attempt, each ±50%,
// at most MaxInterval). Every retry then waits for quota like any request.
type RetryPolicy struct {
	// MaxAttempts bounds the attempts of one request, the first included.
	// Zero means 5; 1 means never retry.
	MaxAttempts int

	// MaxElapsed bounds the time from the first attempt to the start of
	// the last one. Zero means 2 minutes.
	MaxElapsed time.Duration

	// MaxRetryAfter is the longest server-asked wait the Transport honours
	// by waiting: a longer Retry-After returns the response at once instead
	// (and pauses the key for MaxRetryAfter only). Zero means 1 minute.
	MaxRetryAfter time.Duration

	// InitialInterval is the first backoff delay when the server gives no
	// Retry-After. Zero means 500ms.
	InitialInterval time.Duration

	// MaxInterval caps one backoff delay. Zero means 30s.
	MaxInterval time.Duration

	// Budget is the fraction of recent requests (the last 10 seconds) that
	// may be retries, so that a failing upstream gets no retry storm; on
	// top, 10 retries per 10 seconds are always allowed. Zero means 0.2;
	// negative means no budget.
	Budget float64
}

func (p *RetryPolicy) budget() float64 {
	if p.Budget == 0 {
		return 0.2
	}
	return p.Budget
}

func (p *RetryPolicy) maxAttempts() int {
	if p.MaxAttempts <= 0 {
		return 5
	}
	return p.MaxAttempts
}

func (p *RetryPolicy) maxElapsed() time.Duration {
	if p.MaxElapsed <= 0 {
		return 2 * time.Minute
	}
	return p.MaxElapsed
}

func (p *RetryPolicy) maxRetryAfter() time.Duration {
	if p.MaxRetryAfter <= 0 {
		return time.Minute
	}
	return p.MaxRetryAfter
}

// newBackOff returns the backoff of one request. Elapsed time and attempts
// are bounded by the Transport, not by the backoff.
func (p *RetryPolicy) newBackOff() *backoff.ExponentialBackOff {
	b := &backoff.ExponentialBackOff{
		InitialInterval:     p.InitialInterval,
		RandomizationFactor: backoff.DefaultRandomizationFactor,
		Multiplier:          2,
		MaxInterval:         p.MaxInterval,
		Stop:                backoff.Stop,
		Clock:               backoff.SystemClock,
	}
	if b.InitialInterval <= 0 {
		b.InitialInterval = 500 * time.Millisecond
	}
	if b.MaxInterval <= 0 {
		b.MaxInterval = 30 * time.Second
	}
	b.Reset()
	return b
}

// replayable reports whether req's body can be sent again.
func replayable(req *http.Request) bool {
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// idempotent reports whether net/http would consider req safe to send
// twice: an idempotent method (RFC 9110, 9.2.2) or an idempotency key.
func idempotent(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	// net/http treats both spellings as marking a request idempotent.
	_, ok := req.Header["Idempotency-Key"]
	if !ok {
		_, ok = req.Header["X-Idempotency-Key"]
	}
	return ok
}

// retryable reports whether the outcome of one attempt (resp or err) is
// worth another attempt of req.
func retryable(req *http.Request, resp *http.Response, err error) bool {
	if !replayable(req) {
		return false
	}
	if err != nil {
		return idempotent(req) && transient(req.Context(), err)
	}
	switch resp.StatusCode {
	case http.StatusTooManyRequests:
		return true
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return idempotent(req)
	}
	return false
}

// transient reports whether a transport error may pass by itself. It is
// decided by the error's type and errno, never by its text.
func transient(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false // the caller gave up; nothing to retry
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, io.EOF): // the server closed the connection before answering
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// drain reads at most a few KiB of an abandoned response's body, so that
// the connection can be reused, and closes it.
func drain(resp *http.Response) {
	io.CopyN(io.Discard, resp.Body, 4<<10)
	resp.Body.Close()
}

// sleep waits d or until ctx ends, whichever is first.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
