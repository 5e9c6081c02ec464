package throttle

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/throttle-go/throttle/internal/learn"
)

// Transport is an [http.RoundTripper] that paces requests with a [Waiter],
// reads every response's rate-limit headers, pauses a key whose quota the
// server says is spent, and retries 429s and transient failures. One line
// makes a client stop collecting 429s:
//
//	client := &http.Client{Transport: &throttle.Transport{
//		Waiter: &throttle.Limiter{Limits: []throttle.Limit{{Rate: 10, Burst: 10}}},
//	}}
//
// A request's way through RoundTrip:
//  1. key := Key(req), cost := CostOf(req); the key's [Quota].
//  2. If the key caps the units in flight, take the cost's N units under
//     the cap (in arrival order, while the cap is full). Then wait for the
//     cost on the key's quota. If either fails, nothing is held.
//     The units in flight are held until the attempt's response body is
//     closed or read to the end (or fails), the attempt fails, or ctx
//     ends; a retry takes them again. If the wait fails (ctx ends, or the
//     turn is past ctx's deadline, or so close to it that less time is
//     left than the fastest recent round trip took), nothing is sent and
//     nothing reserved, the request body is closed and the wait's error
//     is returned. A turn that comes with less time left than a round
//     trip measured while it waited is not sent either (its units are
//     spent): the request could only time out in flight.
//  3. Send through Base. The caller's request is never modified.
//  4. Settle the attempt's cost from the response if Usage tells it (see
//     [Quota].Settle; a cost in the body is settled with [SettleResponse]).
//     Read the response's headers ([ratelimit.Parse]), and decide what follows
//     ([RetryPolicy].Classify). If the server says the quota is spent (a
//     429 or 503 with Retry-After, a rate-limit 403, or remaining 0 with a
//     reset), pause the key until then, so every caller of that key holds
//     off, not just this one.
//  5. If the decision is a retry and attempts, elapsed time, the deadline
//     and the retry budget allow: read a few KiB of the body (for at most
//     half a second) and close it, wait the retry delay, and go back to
//     step 2. A retry whose turn would come past MaxElapsed or the
//     deadline is given up before it is sent, and the last response
//     returned.
//  6. Otherwise return the last response exactly as received (a final 429
//     is a response, not an error), or the error. A failure that is not
//     retried is reported as an EventGiveUp with its reason.
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

	// Waiter paces requests: a [Quotas] ([Limiter], or the distributed
	// package's Limiter for a fleet) waits on For(Key(req)) and is told
	// what servers say of each key (pauses, windows, declared limits,
	// refusals: [Quota].Observe); another Waiter (a *rate.Limiter) paces
	// every request, and what servers say goes to a per-key Limiter the
	// Transport keeps in front of it. Nil means no pacing of the
	// Transport's own: only what servers say.
	Waiter Waiter

	// Key names the quota a request spends. Nil means [HostKey]: the
	// request's host, lowercased, without a default port, so each API gets
	// its own quota. Keys of a [Limiter]'s Overrides are written as Key
	// gives them.
	Key func(*http.Request) string

	// CostOf is what a request costs: N units of the key's first limit
	// (an LLM call's tokens when that limit counts them, a batch's size),
	// and units of its further limits (e.g. {"tokens": estimate} beside
	// requests). Each attempt waits for all of it at once. Nil means one
	// unit of the first limit.
	CostOf func(*http.Request) Cost

	// Usage, if not nil, tells from each attempt's response what the
	// attempt really cost (an LLM call's tokens, from a header): ok true
	// settles the attempt's cost as actual on the key's quota
	// ([Quota].Settle: the difference is given back or charged; a unit
	// actual does not name stays as spent), before the response's
	// rate-limit headers are applied. A cost known only from the body is
	// settled with [SettleResponse] instead. Nil means no settling from
	// the response. Not called in a dry run.
	Usage func(*http.Response) (actual Cost, ok bool)

	// Retry says what is retried and when. The zero value is the default
	// policy.
	Retry RetryPolicy

	// CostUnit is what a cost's N counts, matched against the unit of
	// the policies a server describes ([ratelimit.Policy].Unit): the quota
	// windows of that unit pace the key. "" means "requests"; set
	// "tokens" when CostOf's N is an LLM call's tokens.
	CostUnit string

	// DisableDeclaredLimits: a key with no configured limit is not paced
	// by the limit its server declares (RateLimit-Policy, X-RateLimit-Limit
	// with a window). By default it is.
	DisableDeclaredLimits bool

	// MaxWait bounds each attempt's wait for quota: a request whose turn
	// is further away fails at once, nothing sent and nothing reserved,
	// with a [*DeadlineError] (it matches [ErrWouldExceedDeadline])
	// whose Delay is how long the wait would have been: when the quota
	// frees up, as the waiter knows it (a spent window's reset, a pause,
	// the queue ahead). A retry that cannot start within it is given up
	// and the last response returned. It is the fail-fast choice for a
	// caller that would rather do something else than wait out a long
	// window (GitHub's hourly reset). A wait for a slot under an
	// in-flight cap ([Quota].Acquire), whose end no one knows in advance,
	// waits up to MaxWait and then fails the same way, holding nothing.
	// Zero means no bound but the context's deadline.
	MaxWait time.Duration

	// DisableAdaptive: bare rejections (a 429 or 503 that says nothing of
	// when to come back) do not slow the key down. By default they cut its
	// pace, which then regrows (see [Quota].Observe); also when a limit is
	// configured, since a server that rejects requests within it is right.
	// A rejection marked permanent (x-should-retry: false) never does.
	DisableAdaptive bool

	// OnEvent, if not nil, is called for each wait on quota that blocked
	// (and, for a wait that blocked on the key's in-flight cap, an
	// EventInFlight from the waiter), each pause and each retry, and for
	// each request that failed and is not retried: the place for logs
	// ([LogEvents]) and metrics. It is
	// also told of the decisions the key's waiter takes by itself from
	// this Transport's responses (slow-downs, shifts, windows, declared
	// limits, and a waiter's store failures), which the Transport passes
	// it in the context of each waiter call ([WithEvents]), and of the
	// end of a slow-down of a key it last adapted (EventRecovered, from a
	// timer's goroutine). It is called synchronously from RoundTrip, from
	// many goroutines at once, and must not block.
	OnEvent func(Event)

	// DryRun: the Transport computes and reports every delay it would
	// impose but imposes none, the way a new limit is rolled out in
	// shadow before it is enforced. Each request is sent at once:
	//   - its wait for quota (its whole cost) is asked for without
	//     waiting, and reported as
	//     an EventWouldWait with the delay. The waiter is asked with a
	//     context whose deadline is now: a waiter keeping the [Waiter]
	//     contract takes an immediate turn, and reserves nothing for a
	//     later one and tells its delay. So a dry run's quota counts only
	//     the requests that would have gone at once, and the delays
	//     reported are those of a request arriving alone, not of the queue
	//     enforcing would build. A waiter that cannot tell the delay
	//     (a *rate.Limiter) is reported with Delay 0 and its error. A
	//     waiter whose store calls take their timeout from the context's
	//     deadline (the distributed waiter on a go-redis client with
	//     ContextTimeoutEnabled) fails every probe with a timeout: do not
	//     dry-run with one.
	//   - a failure that would be retried is returned, and reported as an
	//     EventWouldRetry with the retry's delay: a retry made without its
	//     delay would be a retry storm.
	//   - what servers say still reaches the waiter: pauses (reported as
	//     EventPause), windows, declared limits, slow-downs. They delay no
	//     request of this Transport, and show in the delays reported next.
	//     A waiter shared with other processes shares them.
	//   - no request fails early for its deadline.
	//   - nothing is taken under an in-flight cap.
	// False means enforcing.
	DryRun bool

	server  Limiter     // what servers said, for waiters that cannot keep it
	budget  retryBudget // shared by every request of the Transport
	rtt     roundTrips  // how long recent round trips took
	learned learn.Keys  // what the keys' responses told, beyond one response
}

func (t *Transport) base() http.RoundTripper {
	if t.Base == nil {
		return http.DefaultTransport
	}
	return t.Base
}

func (t *Transport) key(req *http.Request) string {
	if t.Key == nil {
		return HostKey(req)
	}
	return t.Key(req)
}

func (t *Transport) cost(req *http.Request) Cost {
	if t.CostOf == nil {
		return Cost{N: 1}
	}
	c := t.CostOf(req)
	c.Retry = false
	return c
}

// quota returns key's quota. A Waiter that keeps no quota per key (a
// *rate.Limiter) is chained behind the Transport's own per-key Limiter,
// which keeps what servers say for it.
func (t *Transport) quota(key string) Quota {
	switch w := t.Waiter.(type) {
	case nil:
		return chain{Quota: t.server.For(key)}
	case Quotas:
		return w.For(key)
	default:
		return chain{Quota: t.server.For(key), w: w}
	}
}

// capped reports whether q caps its units in flight, so that an attempt
// holds its cost until its response is done.
func capped(q Quota) bool {
	u, ok := q.(uncapped)
	return !ok || !u.NoInFlightCap()
}

// uncapped is a [Quota] that can tell that its key has no in-flight cap,
// now or later: its Acquire holds nothing, so [Transport] neither calls
// it nor wraps a response's body to release it. The distributed package's
// keys implement it.
type uncapped interface {
	NoInFlightCap() bool
}

// chain is the quota of a Waiter that keeps none per key, or of none:
// what servers say is kept by the Transport's own key (Quota), which
// counts no unit but the first's, and each wait waits on it, then on w
// (if any).
type chain struct {
	Quota
	w Waiter
}

// NoInFlightCap reports that the chain has no in-flight cap: the
// Transport's own keys have none.
func (c chain) NoInFlightCap() bool { return true }

func (c chain) WaitN(ctx context.Context, n int) error {
	if err := c.Quota.WaitN(ctx, n); err != nil || c.w == nil {
		return err
	}
	return c.w.WaitN(ctx, n)
}

func (c chain) Wait(ctx context.Context, cost ...Cost) error {
	s := sum(cost)
	if err := c.Quota.Wait(ctx, Cost{N: s.N, Retry: s.Retry}); err != nil || c.w == nil {
		return err
	}
	return c.w.WaitN(ctx, s.N)
}

func (t *Transport) emit(e Event) {
	if t.OnEvent != nil {
		t.OnEvent(e)
	}
}

// RoundTrip implements [http.RoundTripper].
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	key, cost := t.key(req), t.cost(req)
	q := t.quota(key)
	rs := &retries{t: t, req: req, start: time.Now(), cost: cost}
	t.budget.request(rs.start)
	// last is the previous attempt's response, its body read into memory,
	// while its retry waits: a retry given up before it is sent returns it.
	var last *http.Response
	var lastRec *settlement // last's settlement (see SettleResponse)
	// held and loose are what a panic (a hook's: OnEvent, Classify, a
	// Base's) must give back on its way up: the in-flight units an
	// attempt holds before its response's body does, and a response
	// whose body holds them that the caller will never get.
	var held func()
	var loose *http.Response
	defer func() {
		if p := recover(); p != nil {
			if held != nil {
				held()
			}
			closeResponse(loose)
			closeResponse(last)
			panic(p)
		}
	}()
	ev := Event{Request: req, Key: key}
	for attempt := 1; ; attempt++ {
		ev.Attempt = attempt
		r := req
		if attempt > 1 {
			var err error
			if r, err = rewind(ctx, req); err != nil {
				closeResponse(last)
				return nil, t.giveUp(ev, reasonRewindFailed, err)
			}
		}
		// The waiter's own decisions during this attempt's calls reach
		// OnEvent through ectx (see WithEvents).
		ectx := t.withAttemptEvents(ctx, req, attempt)
		// The first attempt's wait starts as the request does (the clock
		// is read once for both), and the attempt is sent as it ends.
		waitStart := rs.start
		if attempt > 1 {
			waitStart = time.Now()
		}
		release, sent, bound, err := t.wait(ectx, rs, q, key, attempt, waitStart)
		held = release
		if err != nil {
			closeBody(r)
			answer, reason := rs.waitFailed(attempt, bound, last != nil)
			var de *DeadlineError
			if bound == reasonMaxWait && errors.As(err, &de) {
				ev.Delay = de.Delay // when the quota frees up
			}
			if answer {
				ev.Attempt, ev.StatusCode = attempt-1, last.StatusCode
				t.giveUp(ev, reason, nil)
				return attach(last, req, lastRec), nil
			}
			closeResponse(last)
			return nil, t.giveUp(ev, reason, err)
		}
		closeResponse(last)
		last, lastRec = nil, nil

		resp, err := t.base().RoundTrip(r)
		received := time.Now()
		if err != nil {
			// The RoundTripper contract allows a response or an error,
			// never both: a Base that breaks it does not leak the body.
			closeResponse(resp)
			resp = nil
		} else if resp == nil {
			err = errors.New("throttle: " + reasonNoResponse)
		}
		if capped(q) && !t.DryRun {
			if resp == nil {
				release() // a transport error: nothing is in flight any more
			} else {
				holdUntilDone(ctx, resp, release)
			}
		}
		held, loose = nil, resp
		o := Outcome{Request: req, Response: resp, Err: err, Attempt: attempt}
		var d Decision
		slowed := false // the key's waiter slowed down for a bare rejection
		timing := false // or took it for the strict server's timing
		var rec *settlement
		if resp != nil {
			t.rtt.observe(received, received.Sub(sent))
			rec = t.settleAttempt(ectx, q, resp, cost)
			d, slowed, timing = t.observe(ectx, &o, q, key, cost.N, sent, received)
		} else {
			_, _ = q.Observe(ectx, Feedback{Spent: cost.N, Age: received.Sub(sent)}) // answered, with nothing said
			d = t.Retry.classify(o)
		}
		retry, delay, reason := rs.next(o, d, received, slowed, timing)
		ev.Err, ev.StatusCode = err, 0
		if resp != nil {
			ev.StatusCode = resp.StatusCode
		}
		if !retry {
			if reason != "" {
				ev.Delay = delay // a wait past MaxRetryAfter: when the quota frees up
				t.giveUp(ev, reason, err)
			}
			return attach(resp, req, rec), err
		}
		if t.DryRun {
			ev.Kind, ev.Delay = EventWouldRetry, delay
			t.emit(ev)
			return resp, err
		}
		ev.Kind, ev.Delay = EventRetry, delay
		if timing {
			ev.Reason = reasonTiming
		}
		t.emit(ev)
		ev.Delay, ev.Reason = 0, ""
		if resp != nil {
			last, lastRec = keep(ctx, resp), rec
		}
		loose = nil
		if err := sleep(ctx, delay-time.Since(received)); err != nil {
			closeResponse(last)
			ev.StatusCode = 0
			return nil, t.giveUp(ev, reasonContextEnded, err)
		}
	}
}

// giveUp reports that the request ev is about fails for reason, with err
// if it failed with one, and returns err. ev.Delay is the wait that made
// it give up, when one did (MaxRetryAfter, MaxWait), else 0.
func (t *Transport) giveUp(ev Event, reason string, err error) error {
	ev.Kind, ev.Reason, ev.Err = EventGiveUp, reason, err
	t.emit(ev)
	return err
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

// withAttemptEvents returns ctx carrying the Transport's OnEvent for the
// waiter calls of one attempt of req; ctx itself if there is no OnEvent.
func (t *Transport) withAttemptEvents(ctx context.Context, req *http.Request, attempt int) context.Context {
	if t.OnEvent == nil {
		return ctx
	}
	return context.WithValue(ctx, eventsKey{}, &eventSink{fn: t.OnEvent, req: req, attempt: attempt})
}
