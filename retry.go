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
	"github.com/throttle-go/throttle/ratelimit"
)

// RetryPolicy says which failed requests [Transport] sends again, and when.
// The zero value is the default policy described on each field.
//
// What is retried is Classify's decision; the default ([DefaultClassify]):
//   - 429 Too Many Requests, for any method: the server did not process
//     the request. So is a 403 that is a rate limit (GitHub's secondary
//     limits: a Retry-After, or x-ratelimit-remaining 0 with a reset),
//     which also pauses the key.
//   - 500, 502, 503 and 504, and transport errors that are transient
//     (connection refused or reset, timeouts, a connection closed before
//     the response), only for requests net/http would replay: an idempotent
//     method (GET, HEAD, OPTIONS, TRACE, PUT, DELETE) or an Idempotency-Key
//     header.
//   - x-should-retry (OpenAI, Anthropic): "true" retries any failure,
//     "false" none.
//   - Never a request whose body cannot be sent again: it needs no body or
//     a GetBody (http.NewRequest sets it for bytes, strings and their
//     readers). The Transport holds to this whatever Classify says.
//
// When: after the server's Retry-After (or the reset of an exhausted quota)
// when the response gives one, but never sooner than a tenth of
// InitialInterval (50ms by default): a server answering "Retry-After: 0"
// to every attempt would otherwise see them all within a millisecond, and
// a request would spend its attempts on one moment of overload. Else
// after a jittered exponential backoff
// (cenkalti/backoff/v4: InitialInterval × Multiplier^attempt, each ±50%,
// at most MaxInterval). A bare 429 or 503 that slowed the key's quota
// down (unless DisableAdaptive) is retried after
// InitialInterval (±50%) each time instead: the key's slower pace, shared
// by every request, is then what backs off, and a per-request backoff
// growing on top of it would hold a request back for seconds after the
// upstream is back. One that a [Limiter]'s key takes for a strict
// server's timing, not its budget (a rare refusal under a limit told
// exactly, which leaves the key's pace as it is), is retried at once: it
// takes the key's next paced turn. Every retry then waits for quota like
// any request, ahead of first attempts ([Cost].Retry).
//
// The bounds below hold whatever Classify says. A retry is given up, and
// the last response returned, when its delay or its wait for quota would
// end past MaxElapsed or too close to the context's deadline: the bounds
// are checked before sleeping, never after.
type RetryPolicy struct {
	// MaxAttempts bounds the attempts of one request, the first included.
	// Zero means 5; 1 means never retry.
	MaxAttempts int

	// MaxElapsed bounds the time from the first attempt to the start of
	// the last one, retry delays and waits for quota included. Zero means
	// 2 minutes.
	MaxElapsed time.Duration

	// MaxRetryAfter is the longest server-asked retry delay the Transport
	// honours by waiting: a longer Retry-After (or reset of a spent
	// quota) returns the response at once instead, with an EventGiveUp
	// whose Delay is the wait the server asked for (when the quota frees
	// up), and pauses the key for MaxRetryAfter only. It caps one wait
	// the server asks for, not the pacing of a window: a window's
	// remaining units are spread over the time to its reset however long
	// (GitHub's 5,000 an hour), and a request waits its turn on it (bound
	// that wait with the context's deadline or [Transport].MaxWait).
	// Zero means 1 minute.
	MaxRetryAfter time.Duration

	// InitialInterval is the first backoff delay when the server gives no
	// Retry-After; a tenth of it is the least delay of any retry, also
	// when the server asks for less. Zero means 500ms.
	InitialInterval time.Duration

	// MaxInterval caps one backoff delay. Zero means 30s.
	MaxInterval time.Duration

	// Budget is the fraction of recent requests (the last 10 seconds) that
	// may be retries, so that a failing upstream gets no retry storm; on
	// top, 10 retries per 10 seconds are always allowed. A retry that
	// waits a delay the server asked for (a Decision with HasDelay and a
	// positive Delay: a Retry-After, a spent quota's reset) is not held
	// to it: the server paces those, and a client library retrying them
	// itself would not stop at a budget either. Zero means 0.2;
	// negative means no budget.
	Budget float64

	// Classify decides what follows each attempt: retry, pause the key,
	// or return. It is called from RoundTrip, from many goroutines at
	// once, and must not read the response's body. Nil means
	// [DefaultClassify]; a hook that changes one case calls it for the
	// rest.
	Classify func(Outcome) Decision
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

// minDelay is the least delay of a retry, also when the server or the
// Classify hook asks for less (Retry-After: 0): see [RetryPolicy].
func (p *RetryPolicy) minDelay() time.Duration {
	if p.InitialInterval <= 0 {
		return 500 * time.Millisecond / minDelayDivisor
	}
	return p.InitialInterval / minDelayDivisor
}

// minDelayDivisor: the floor of retry delays is InitialInterval over this.
const minDelayDivisor = 10

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

// Outcome is what one attempt came to, as [RetryPolicy].Classify sees it.
// The Transport fills it for each attempt; it is a plain value, and the
// request and response it points to are shared with the Transport and
// the caller: read them, do not modify them.
type Outcome struct {
	Request  *http.Request  // the caller's request; do not modify it
	Response *http.Response // the attempt's response, nil when Err is set; do not read its body
	Err      error          // the attempt's transport error
	Attempt  int            // 1 for the first attempt

	// Reading is what the response's headers say (see [ratelimit.Parse]);
	// zero when Err is set.
	Reading ratelimit.Reading

	// Wait is how long the server asked every caller of the quota to hold
	// off: a 429's or 503's Retry-After, or the reset of a quota the
	// response says is spent, at most a year. Valid if HasWait.
	Wait    time.Duration
	HasWait bool
}

// Decision is what follows an attempt. The zero Decision returns the
// attempt's response or error as an answer that is not a failure.
type Decision struct {
	// Retry sends the request again after Delay. A zero Delay means the
	// policy's backoff, unless HasDelay is set: then it means as soon as
	// the policy allows (a server's "Retry-After: 0"): a retry waits at
	// least a tenth of InitialInterval. The Transport's bounds (MaxAttempts,
	// MaxElapsed, the context's deadline, the retry budget, a replayable
	// body) may still give the retry up; a Delay beyond MaxRetryAfter
	// gives it up at once.
	Retry    bool
	Delay    time.Duration
	HasDelay bool

	// Pause holds off every caller of the key for Pause (at most
	// MaxRetryAfter): the server said the quota is spent. Zero means no
	// pause beyond what the response's headers say.
	Pause time.Duration

	// Reason, when Retry is false, marks the outcome as a failure that is
	// not retried: the Transport reports an EventGiveUp with it. Empty
	// for a success or an answer (a 404): no event.
	Reason string
}

// Reasons given by DefaultClassify and the Transport's bounds.
const (
	reasonNotIdempotent  = "method is not idempotent"
	reasonNotReplayable  = "request body cannot be replayed"
	reasonStatus         = "status is not retried"
	reasonShouldNotRetry = "server said x-should-retry: false"
	reasonNotTransient   = "error is not transient"
	reasonContextEnded   = "context ended"
	reasonMaxAttempts    = "MaxAttempts reached"
	reasonMaxElapsed     = "MaxElapsed reached"
	reasonDeadline       = "context deadline before the retry"
	reasonBudget         = "retry budget spent"
	reasonMaxRetryAfter  = "server asked to wait longer than MaxRetryAfter"
	reasonMaxWait        = "wait for quota longer than MaxWait"
	reasonWaitFailed     = "wait for quota failed"
	reasonRewindFailed   = "request body rewind failed"
	reasonNoResponse     = "Base returned neither a response nor an error"
	// An EventRetry's reason, for a refusal a Limiter's key took for a
	// strict server's timing (see [RetryPolicy]).
	reasonTiming = "strict server's timing: the key's pace stays"
)

// DefaultClassify is the decision of the zero [RetryPolicy]: see there.
// A failure that is not retried gets a Reason; x-should-retry (read from
// o.Reading, where a false in any of its lines wins) counts on 4xx and
// 5xx responses only.
func DefaultClassify(o Outcome) Decision {
	req := o.Request
	if o.Err != nil {
		switch {
		case req.Context().Err() != nil:
			return Decision{Reason: reasonContextEnded}
		case !transient(req.Context(), o.Err):
			return Decision{Reason: reasonNotTransient}
		case !idempotent(req):
			return Decision{Reason: reasonNotIdempotent}
		case !replayable(req):
			return Decision{Reason: reasonNotReplayable}
		}
		return Decision{Retry: true}
	}
	status := o.Response.StatusCode
	if status < 400 {
		return Decision{}
	}
	var d Decision
	limited := status == http.StatusTooManyRequests
	if status == http.StatusForbidden {
		// GitHub's secondary rate limits come as 403 with Retry-After, or
		// with x-ratelimit-remaining 0 and a reset; any other 403 is an
		// answer.
		switch {
		case o.Reading.HasRetryAfter:
			limited, d.Pause = true, o.Reading.RetryAfter
		case o.HasWait && o.Wait > 0:
			limited, d.Pause = true, o.Wait
		}
		d.Delay, d.HasDelay = d.Pause, limited
	} else if o.HasWait {
		d.Delay, d.HasDelay = o.Wait, true
	}
	switch r := o.Reading; {
	case r.Permanent():
		return Decision{Pause: d.Pause, Reason: reasonShouldNotRetry}
	case r.HasShouldRetry: // x-should-retry: true
	default:
		switch {
		case limited:
		case status == http.StatusInternalServerError, status == http.StatusBadGateway,
			status == http.StatusServiceUnavailable, status == http.StatusGatewayTimeout:
			if !idempotent(req) {
				return Decision{Pause: d.Pause, Reason: reasonNotIdempotent}
			}
		case status >= 500:
			return Decision{Pause: d.Pause, Reason: reasonStatus}
		default:
			return Decision{Pause: d.Pause} // an answer: 400, 404, 409, …
		}
	}
	if !replayable(req) {
		return Decision{Pause: d.Pause, Reason: reasonNotReplayable}
	}
	d.Retry = true
	return d
}

func (p *RetryPolicy) classify(o Outcome) Decision {
	if p.Classify != nil {
		return p.Classify(o)
	}
	return DefaultClassify(o)
}

// retries is one request's way through its attempts: the state the
// Transport's bounds need.
type retries struct {
	t     *Transport
	req   *http.Request
	start time.Time
	bo    *backoff.ExponentialBackOff // made at the first backoff
	cost  Cost                        // the request's cost, as each attempt spends it
}

// next decides what follows an attempt whose outcome o was classified d
// at now: a retry after delay, or none, with the reason when o is a
// failure (and, for a delay past MaxRetryAfter, that delay). slowed reports that o was a bare rejection the key's waiter
// slowed down for: then the backoff does not grow (see [RetryPolicy]).
// timing reports that it was one a Limiter's key took for a strict
// server's timing (anchor.go: jitter): the key's pace is right, and the
// retry takes its next paced turn, without a delay of its own.
// Every bound is checked here, before any sleep: a retry that could not
// start before MaxElapsed, or that would leave less than a round trip
// before ctx's deadline, is given up now.
func (r *retries) next(o Outcome, d Decision, now time.Time, slowed, timing bool) (retry bool, delay time.Duration, reason string) {
	p := &r.t.Retry
	if !d.Retry {
		return false, 0, d.Reason
	}
	if !replayable(r.req) {
		return false, 0, reasonNotReplayable
	}
	switch {
	case d.Delay > p.maxRetryAfter():
		return false, d.Delay, reasonMaxRetryAfter
	case d.HasDelay || d.Delay > 0:
		delay = max(d.Delay, p.minDelay())
	case timing:
		delay = 0
	default:
		if r.bo == nil {
			r.bo = p.newBackOff()
		}
		if slowed {
			// The waiter's cut pace backs off for every request of the
			// key; this one only needs its attempts spread (±50%).
			r.bo.Reset()
		}
		delay = r.bo.NextBackOff()
	}
	at := now.Add(delay)
	switch {
	case o.Attempt >= p.maxAttempts():
		return false, 0, reasonMaxAttempts
	case at.Sub(r.start) > p.maxElapsed():
		return false, 0, reasonMaxElapsed
	case r.tooLate(at, now):
		return false, 0, reasonDeadline
	case !(d.HasDelay && d.Delay > 0) && !r.t.budget.retry(now, p.budget()):
		return false, 0, reasonBudget
	}
	return true, delay, ""
}

// waitFailed decides what follows a wait for quota that failed before
// attempt: bound is the reason of the bound the wait was refused at ("" for
// a failure of the waiter's own, or an ended context), last whether the
// previous attempt's response is kept. When a retry could not start in
// time, that response is the answer; else the request fails, with the
// reason its give-up reports.
func (r *retries) waitFailed(attempt int, bound string, last bool) (answer bool, reason string) {
	switch {
	case last && bound != "":
		return true, bound
	case r.req.Context().Err() != nil:
		return false, reasonContextEnded
	case bound == reasonMaxWait:
		return false, reasonMaxWait
	case attempt == 1 || bound == "":
		return false, reasonWaitFailed
	}
	return false, bound
}

// bound returns the latest time the quota wait of attempt may end (zero
// for none), and the reason to give up a retry that cannot start by then:
// a retry must start within MaxElapsed, any wait end within the
// Transport's MaxWait, and any attempt leave a round trip before ctx's
// deadline.
func (r *retries) bound(attempt int, now time.Time) (time.Time, string) {
	var at time.Time
	reason := ""
	if attempt > 1 {
		at, reason = r.start.Add(r.t.Retry.maxElapsed()), reasonMaxElapsed
	}
	if mw := r.t.MaxWait; mw > 0 {
		if b := now.Add(mw); at.IsZero() || b.Before(at) {
			at, reason = b, reasonMaxWait
		}
	}
	if dl, ok := r.req.Context().Deadline(); ok {
		if dl = dl.Add(-r.t.rtt.estimate(now)); at.IsZero() || dl.Before(at) {
			at, reason = dl, reasonDeadline
		}
	}
	return at, reason
}

// tooLate reports whether an attempt sent at would leave less than a
// recent round trip (estimated at now) before the request's deadline.
func (r *retries) tooLate(at, now time.Time) bool {
	dl, ok := r.req.Context().Deadline()
	return ok && at.Add(r.t.rtt.estimate(now)).After(dl)
}
