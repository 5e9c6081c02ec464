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
	// package's waiter fit. What servers say (pauses, windows, declared
	// limits, bare rejections) goes to the key's waiter when it is an
	// [Adapter] or a [Pauser], else to a per-key [Limiter] the Transport
	// keeps in front of it. Nil means no pacing of the Transport's own:
	// only what servers say.
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

	// CostUnit is what Cost counts, matched against the unit of the
	// policies a server describes ([Policy].Unit): the quota windows of
	// that unit pace the key. "" means "requests"; set "tokens" when Cost
	// returns an LLM call's tokens.
	CostUnit string

	// DisableDeclaredLimits: a key with no configured limit is not paced
	// by the limit its server declares (RateLimit-Policy, X-RateLimit-Limit
	// with a window). By default it is.
	DisableDeclaredLimits bool

	// DisableAdaptive: bare rejections (a 429 or 503 that says nothing of
	// when to come back) do not slow the key down. By default they cut its
	// pace, which then regrows (see [Adapter]); also when a limit is
	// configured, since a server that rejects requests within it is right.
	DisableAdaptive bool

	// OnEvent, if not nil, is called for each wait on quota that blocked,
	// each pause and each retry, and when the Transport gives up retrying:
	// the place for logs and metrics. It is called synchronously from
	// RoundTrip, from many goroutines at once, and must not block.
	OnEvent func(Event)

	server Limiter     // what servers said, for waiters that cannot keep it
	budget retryBudget // shared by every request of the Transport
}

// minReportedWait is the shortest wait reported as an EventWait: a wait
// that did not block still takes a few hundred nanoseconds.
const minReportedWait = time.Millisecond

// EventKind tells what an [Event] reports.
type EventKind int

const (
	// EventWait: a request waited Delay (1ms or more) for its quota
	// before an attempt.
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

// waiter returns the waiter of key's quota, and the waiter that takes the
// server's feedback about it. A waiter that can neither adapt nor pause
// (a *rate.Limiter) is chained behind the Transport's own per-key
// Limiter, which keeps the server's pauses and pacing for it.
func (t *Transport) waiter(key string) (w, fb Waiter) {
	switch tw := t.Waiter.(type) {
	case nil:
		w = t.server.For(key)
		return w, w
	case KeyedWaiter:
		w = tw.For(key)
	default:
		w = tw
	}
	switch w.(type) {
	case Adapter, Pauser:
		return w, w
	}
	fb = t.server.For(key)
	return chain{fb, w}, fb
}

// chain waits on each waiter in turn.
type chain [2]Waiter

func (c chain) WaitN(ctx context.Context, n int) error {
	for _, w := range c {
		if err := w.WaitN(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

// WaitRetryN waits on the first waiter ahead of its first attempts, then
// on the second.
func (c chain) WaitRetryN(ctx context.Context, n int) error {
	if err := c[0].(RetryWaiter).WaitRetryN(ctx, n); err != nil {
		return err
	}
	return c[1].WaitN(ctx, n)
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
	w, fb := t.waiter(key)
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
		if err := t.wait(ctx, w, attempt, n); err != nil {
			closeBody(r)
			return nil, err
		}
		if t.OnEvent != nil {
			if d := time.Since(waitStart); d >= minReportedWait {
				t.emit(Event{Kind: EventWait, Request: req, Key: key, Attempt: attempt, Delay: d})
			}
		}

		sent := time.Now()
		resp, err := t.base().RoundTrip(r)
		var serverWait time.Duration
		serverSaid := false
		if err == nil {
			serverWait, serverSaid = t.observe(ctx, req, resp, fb, key, attempt, n, sent)
		} else if a, ok := fb.(Adapter); ok {
			a.Adapt(ctx, Feedback{Cost: n, Age: time.Since(sent)}) // answered, with nothing said
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
		case serverSaid:
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

// wait waits for n units of w's quota for one attempt: a retry through
// [RetryWaiter] when w has it, so that it keeps its place ahead of the
// requests that arrived since its first attempt.
func (t *Transport) wait(ctx context.Context, w Waiter, attempt, n int) error {
	if rw, ok := w.(RetryWaiter); ok && attempt > 1 {
		return rw.WaitRetryN(ctx, n)
	}
	return w.WaitN(ctx, n)
}

// observe reads resp's rate-limit headers and tells the key's waiter what
// they say: a pause when the quota is spent, the quota's window, the
// server's declared limit, a bare rejection. It returns how long the
// server asked to wait, and whether it said (see feedback).
func (t *Transport) observe(ctx context.Context, req *http.Request, resp *http.Response, w Waiter, key string, attempt, n int, sent time.Time) (time.Duration, bool) {
	now := time.Now()
	f, wait, said := t.feedback(resp, ParseQuota(resp.Header, now), now.Sub(sent))
	f.Cost = n
	switch w := w.(type) {
	case Adapter:
		if err := w.Adapt(ctx, f); err != nil {
			f.Pause = 0
		}
	case Pauser:
		if f.Pause > 0 && w.Pause(ctx, f.Pause) != nil {
			f.Pause = 0
		}
	default:
		f.Pause = 0
	}
	if f.Pause > 0 {
		t.emit(Event{Kind: EventPause, Request: req, Key: key, Attempt: attempt, Delay: f.Pause, StatusCode: resp.StatusCode})
	}
	return wait, said
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
