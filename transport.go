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
//		Waiter: &throttle.Limiter{Limit: 10, Burst: 10},
//	}}
//
// A request's way through RoundTrip:
//  1. key := Key(req), n := Cost(req).
//  2. If the key's waiter caps the units in flight ([Acquirer]), take n
//     units under the cap (in arrival order, while the cap is full). Then
//     wait for n units of key's quota. If either fails, nothing is held.
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
//  4. Settle the attempt's cost from the response if Settle tells it (see
//     [Settler]; a cost in the body is settled with [SettleResponse]).
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

	// Waiter paces requests. If it is a [KeyedWaiter], each request waits
	// on For(Key(req)). A *rate.Limiter, a [*Limiter] or the distributed
	// package's waiter fit. What servers say (pauses, windows, declared
	// limits, bare rejections) goes to the key's waiter when it is an
	// [Adapter] or a [Pauser], else to a per-key [Limiter] the Transport
	// keeps in front of it. A [*Limiter]'s keys, and a distributed
	// quota's for the whole fleet, also take the hidden budget of a server
	// that refuses with Retry-After alone, below the key's limit: once two
	// refusal cycles agree, q units per w, kept as a window in the key's
	// state; w is then probed down to within 1% of the budget's (a
	// refused probe pauses the key only until the bound its cycles set,
	// before its whole-second Retry-After ends; the request's own retry
	// waits the Retry-After). See [Limiter]. A key with [Limiter.Limits]
	// does not learn one: its refusals may be for another unit. Nil means no pacing of the
	// Transport's own: only what servers say.
	Waiter Waiter

	// Key names the quota a request spends. Nil means [HostKey]: the
	// request's host, lowercased, without a default port, so each API gets
	// its own quota. Keys of a [Limiter]'s Overrides are written in the
	// form Key returns.
	Key func(*http.Request) string

	// Cost is how many units of quota a request spends (tokens of an LLM
	// call, a batch's size). Nil means 1 per request.
	Cost func(*http.Request) int

	// Units, if not nil, is what a request costs in the key's further
	// limits (e.g. {{"tokens", estimate}} beside Cost's requests: see
	// [Limiter.Limits]): each attempt waits for Cost and these on every
	// limit at once, through [CostWaiter] when the key's waiter is one.
	// Nil means none.
	Units func(*http.Request) []UnitCost

	// Settle, if not nil, tells from each attempt's response what the
	// attempt really cost (an LLM call's tokens, in a header): ok true
	// and actual ≥ 0 settle the attempt's Cost as actual on the key's
	// waiter, when it is a [Settler] (the difference is given back or
	// charged: see Settler), before the response's rate-limit headers
	// are applied. ok false leaves the estimate as spent. A cost known
	// only from the body is settled with [SettleResponse] instead. Nil
	// means no settling from headers. Not called in a dry run.
	Settle func(*http.Response) (actual int, ok bool)

	// SettleUnits, if not nil, tells from each attempt's response what
	// the attempt really cost in the units Units named (an LLM call's
	// tokens, from its usage: see [SettleResponseUnits] for a body read
	// by the caller): ok true settles the attempt's Units as actual on
	// the key's waiter, when it is a [CostSettler] (per unit, the
	// difference is given back or charged), with Settle's N if Settle
	// tells it too, in one settle. A unit named in neither is left as it
	// is. Nil means no settling of Units from the response. Not called in
	// a dry run.
	SettleUnits func(*http.Response) (actual []UnitCost, ok bool)

	// Retry says what is retried and when. The zero value is the default
	// policy.
	Retry RetryPolicy

	// CostUnit is what Cost counts, matched against the unit of the
	// policies a server describes ([ratelimit.Policy].Unit): the quota windows of
	// that unit pace the key. "" means "requests"; set "tokens" when Cost
	// returns an LLM call's tokens.
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
	// in-flight cap ([Acquirer]), whose end no one knows in advance,
	// waits up to MaxWait and then fails the same way, holding nothing.
	// Zero means no bound but the context's deadline.
	MaxWait time.Duration

	// DisableAdaptive: bare rejections (a 429 or 503 that says nothing of
	// when to come back) do not slow the key down. By default they cut its
	// pace, which then regrows (see [Adapter]); also when a limit is
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
	//   - its wait for quota (in every unit: Units, on a [CostWaiter]) is
	//     asked for without waiting, and reported as
	//     an EventWouldWait with the delay. The waiter is asked with a
	//     context whose deadline is now: a waiter keeping the [Waiter]
	//     contract takes an immediate turn, and reserves nothing for a
	//     later one and tells its delay. So a dry run's waiter counts only
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
	//   - nothing is taken under an in-flight cap ([Acquirer]).
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
//
// a is the key's in-flight cap, when the key's waiter has one (an
// [Acquirer]); nil otherwise.
func (t *Transport) waiter(key string) (w, fb Waiter, a Acquirer) {
	switch tw := t.Waiter.(type) {
	case nil:
		w = t.server.For(key)
		return w, w, nil
	case KeyedWaiter:
		w = tw.For(key)
	default:
		w = tw
	}
	a, _ = w.(Acquirer)
	if u, ok := a.(uncapped); ok && u.NoInFlightCap() {
		a = nil // a key without a cap: no body to wrap
	}
	switch w.(type) {
	case Adapter, Pauser:
		return w, w, a
	}
	fb = t.server.For(key)
	return chain{fb, w}, fb, a
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
	w, fb, a := t.waiter(key)
	rs := &retries{t: t, req: req, start: time.Now()}
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
		release, sent, bound, err := t.wait(ectx, rs, w, a, key, n, attempt, waitStart)
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
		if a != nil && !t.DryRun {
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
			rec = t.settleAttempt(ectx, w, resp, n, rs.units)
			d, slowed, timing = t.observe(ectx, &o, fb, key, n, sent, received)
		} else {
			if a, ok := fb.(Adapter); ok {
				a.Adapt(ectx, Feedback{Cost: n, Age: received.Sub(sent)}) // answered, with nothing said
			}
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
