package throttle

import (
	"context"
	"net/http"
	"time"
)

// Transport is an [http.RoundTripper] that paces requests with a [Waiter],
// reads every response's rate-limit headers, pauses a key whose quota the
// server says is spent, and retries 429s and transient failures. One line
// makes a client stop collecting 429s:
//
//	client := &http.Client{Transport: &throttle.Transport{
//		Waiter: &throttle.Limiter{Limit: 10, Burst: 10},
//	}}
//
// A request's way through RoundTrip:
//  1. key := Key(req), n := Cost(req).
//  2. Wait for n units of key's quota. If the wait fails (ctx ends, or the
//     turn is past ctx's deadline), nothing is sent, the request body is
//     closed and the wait's error is returned.
//  3. Send through Base. The caller's request is never modified.
//  4. Read the response's headers ([ParseQuota]). If the server says the
//     quota is spent (a 429 or 503 with Retry-After, or remaining 0 with a
//     reset), pause the key until then, so every caller of that key holds
//     off, not just this one.
//  5. If the response or error is retryable ([RetryPolicy]) and attempts,
//     elapsed time and the retry budget allow: drain and close the body,
//     wait the retry delay, and go back to step 2.
//  6. Otherwise return the last response exactly as received (a final 429
//     is a response, not an error), or the error.
//
// Every wait, sleep and retry uses the request's context, so
// [http.Client.Timeout] bounds the whole call.
//
// The zero Transport sends through [http.DefaultTransport] with no pacing
// of its own, and still honours the server's pauses and retries. A
// Transport is safe for concurrent use; it must not be copied after first
// use.
type Transport struct {
	// Base sends each attempt. Nil means http.DefaultTransport.
	Base http.RoundTripper

	// Waiter paces requests. If it is a [KeyedWaiter], each request waits
	// on For(Key(req)). A *rate.Limiter, a [*Limiter] or the distributed
	// package's waiter fit. Nil means no pacing but the server's pauses,
	// kept per key in the Transport.
	Waiter Waiter

	// Key names the quota a request spends. Nil means the request's host
	// (req.URL.Host), so each API gets its own quota.
	Key func(*http.Request) string

	// Cost is how many units of quota a request spends (tokens of an LLM
	// call, a batch's size). Nil means 1 per request.
	Cost func(*http.Request) int

	// Retry says what is retried and when. The zero value is the default
	// policy.
	Retry RetryPolicy

	// OnEvent, if not nil, is called for each wait on quota that blocked,
	// each pause and each retry, and when the Transport gives up retrying:
	// the place for logs and metrics. It is called synchronously from
	// RoundTrip, from many goroutines at once, and must not block.
	OnEvent func(Event)

	pauses Limiter     // the pauses kept when Waiter is nil
	budget retryBudget // shared by every request of the Transport
}

// EventKind tells what an [Event] reports.
type EventKind int

const (
	// EventWait: a request waited Delay for its quota before an attempt.
	EventWait EventKind = iota + 1
	// EventPause: a response said Key's quota is spent; the key is paused
	// for Delay.
	EventPause
	// EventRetry: an attempt failed (StatusCode or Err) and the request
	// will be sent again after Delay.
	EventRetry
	// EventGiveUp: an attempt failed and is not retried because attempts,
	// time, the retry budget or MaxRetryAfter ran out; its response or
	// error is returned. Reason says which.
	EventGiveUp
)

func (k EventKind) String() string {
	switch k {
	case EventWait:
		return "wait"
	case EventPause:
		return "pause"
	case EventRetry:
		return "retry"
	case EventGiveUp:
		return "give-up"
	}
	return "unknown"
}

// Event is what [Transport.OnEvent] is told.
type Event struct {
	Kind       EventKind
	Request    *http.Request // the caller's request; do not modify it
	Key        string        // the quota's key
	Attempt    int           // 1 for the first attempt
	Delay      time.Duration // the wait, pause or retry delay
	StatusCode int           // the attempt's status, 0 if it failed with Err
	Err        error         // the attempt's transport error, if any
	Reason     string        // for EventGiveUp: why no retry
}

func (t *Transport) base() http.RoundTripper {
	if t.Base == nil {
		return http.DefaultTransport
	}
	return t.Base
}

func (t *Transport) key(req *http.Request) string {
	if t.Key == nil {
		return req.URL.Host
	}
	return t.Key(req)
}

func (t *Transport) cost(req *http.Request) int {
	if t.Cost == nil {
		return 1
	}
	return t.Cost(req)
}

// waiter returns the waiter of key's quota.
func (t *Transport) waiter(key string) Waiter {
	switch w := t.Waiter.(type) {
	case nil:
		return t.pauses.For(key)
	case KeyedWaiter:
		return w.For(key)
	default:
		return w
	}
}

func (t *Transport) emit(e Event) {
	if t.OnEvent != nil {
		t.OnEvent(e)
	}
}

// RoundTrip implements [http.RoundTripper].
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	key, n := t.key(req), t.cost(req)
	w := t.waiter(key)
	start := time.Now()
	t.budget.request(start)
	var bo interface{ NextBackOff() time.Duration } // made at the first retry
	for attempt := 1; ; attempt++ {
		r := req
		if attempt > 1 {
			var err error
			if r, err = rewind(ctx, req); err != nil {
				return nil, err
			}
		}
		waitStart := time.Now()
		if err := w.WaitN(ctx, n); err != nil {
			closeBody(r)
			return nil, err
		}
		if d := time.Since(waitStart); d > 0 && t.OnEvent != nil {
			t.emit(Event{Kind: EventWait, Request: req, Key: key, Attempt: attempt, Delay: d})
		}

		resp, err := t.base().RoundTrip(r)
		var serverWait time.Duration
		if err == nil {
			serverWait = t.observe(ctx, req, resp, w, key, attempt)
		}
		if !retryable(req, resp, err) {
			return resp, err
		}

		ev := Event{Request: req, Key: key, Attempt: attempt, Err: err}
		if resp != nil {
			ev.StatusCode = resp.StatusCode
		}
		var delay time.Duration
		switch {
		case serverWait > t.Retry.maxRetryAfter():
			ev.Reason = "server asked to wait longer than MaxRetryAfter"
		case serverWait > 0:
			delay = serverWait
		default:
			if bo == nil {
				bo = t.Retry.newBackOff()
			}
			delay = bo.NextBackOff()
		}
		now := time.Now()
		switch {
		case ev.Reason != "":
		case attempt >= t.Retry.maxAttempts():
			ev.Reason = "MaxAttempts reached"
		case now.Add(delay).Sub(start) > t.Retry.maxElapsed():
			ev.Reason = "MaxElapsed reached"
		case pastDeadline(ctx, now.Add(delay)):
			ev.Reason = "context deadline before the retry"
		case !t.budget.retry(now, t.Retry.budget()):
			ev.Reason = "retry budget spent"
		}
		if ev.Reason != "" {
			ev.Kind = EventGiveUp
			t.emit(ev)
			return resp, err
		}
		ev.Kind, ev.Delay = EventRetry, delay
		t.emit(ev)
		if resp != nil {
			drain(resp)
		}
		if err := sleep(ctx, delay); err != nil {
			return nil, err
		}
	}
}

// observe reads resp's rate-limit headers and pauses the key when the
// server says its quota is spent. It returns how long the server asked to
// wait (0 when it did not).
func (t *Transport) observe(ctx context.Context, req *http.Request, resp *http.Response, w Waiter, key string, attempt int) time.Duration {
	q := ParseQuota(resp.Header, time.Now())
	d, ok := q.Wait()
	if !ok || d <= 0 {
		return 0
	}
	// A Retry-After on a redirect or a success is advice for that
	// response alone (RFC 9110, 10.2.3); on a 429 or 503, and a reset of
	// an exhausted quota on any response, is about the quota.
	if q.HasRetryAfter && resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable {
		return 0
	}
	pause := min(d, t.Retry.maxRetryAfter())
	if p, ok := w.(Pauser); ok {
		if err := p.Pause(ctx, pause); err == nil {
			t.emit(Event{Kind: EventPause, Request: req, Key: key, Attempt: attempt, Delay: pause, StatusCode: resp.StatusCode})
		}
	}
	return d
}

// rewind returns a copy of req with a fresh body for another attempt.
func rewind(ctx context.Context, req *http.Request) (*http.Request, error) {
	r := req.Clone(ctx)
	if req.Body != nil && req.Body != http.NoBody {
		body, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		r.Body = body
	}
	return r, nil
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

func pastDeadline(ctx context.Context, t time.Time) bool {
	dl, ok := ctx.Deadline()
	return ok && t.After(dl)
}
