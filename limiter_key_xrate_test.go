package throttle

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"
)

// x/time/rate's own test suite (rate_test.go, v0.16.0), ported to a
// Limiter key's Quota: AllowN, ReserveN and WaitN there are x/time/rate's
// names, and the x/time/rate methods a Quota lacks (Tokens, SetLimit,
// SetBurst) are read from its State and set with Limiter.SetRate. Its
// times t0…t9 are multiples of d = 100 ms (tick) from the first call; a
// synctest bubble's clock stands still
// between sleeps, so each step runs at exactly its time. Where
// x/time/rate's semantics and a Limiter's differ (a cancelled
// reservation's units; a clock that never jumps back) the port says so
// and checks a Limiter's. The cancellation tests are ported as waits in
// refund_test.go (TestRefundsXRatePorted).

// xkey is a Limiter key's Quota with the x/time/rate methods it lacks.
type xkey struct {
	Quota
	l   *Limiter
	key string
}

func newXKey(l *Limiter, key string) xkey { return xkey{l.For(key), l, key} }

// Tokens is x/time/rate's Tokens: State's.
func (k xkey) Tokens() float64 { return keyState(k.l, k.key).Tokens }

// SetLimit is x/time/rate's SetLimit: SetRate with the configured burst.
func (k xkey) SetLimit(r rate.Limit) error {
	_, burst := k.l.key(k.key).k().Rate()
	return k.l.SetRate(k.key, r, burst)
}

// SetBurst is x/time/rate's SetBurst: SetRate with the configured rate.
func (k xkey) SetBurst(b int) error {
	r, _ := k.l.key(k.key).k().Rate()
	return k.l.SetRate(k.key, r, b)
}

// xrate runs f in a bubble with a key of limit and burst and a function
// that sleeps until t0 + k·d.
func xrate(t *testing.T, limit rate.Limit, burst int, f func(t *testing.T, k xkey, at func(int))) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Overrides: map[string][]Limit{"k": {{Rate: limit, Burst: burst}}}}
		k := newXKey(l, "k")
		t0 := time.Now()
		at := func(i int) {
			if d := time.Until(t0.Add(time.Duration(i) * tick)); d > 0 {
				time.Sleep(d)
			}
		}
		f(t, k, at)
	})
}

type xallow struct {
	t    int // in ticks
	toks float64
	n    int
	ok   bool
}

func xrun(t *testing.T, k xkey, at func(int), allows []xallow) {
	t.Helper()
	for i, a := range allows {
		at(a.t)
		// Tokens are whole here: a tolerance far below one unit only
		// absorbs the float rounding of ns arithmetic.
		if toks := k.Tokens(); math.Abs(toks-a.toks) > 1e-9 {
			t.Errorf("step %d: Tokens() at t%d = %v, want %v", i, a.t, toks, a.toks)
		}
		if ok := k.AllowN(a.n); ok != a.ok {
			t.Errorf("step %d: AllowN(%d) at t%d = %v, want %v", i, a.n, a.t, ok, a.ok)
		}
	}
}

func TestXRateLimiterBurst1(t *testing.T) {
	xrate(t, 10, 1, func(t *testing.T, k xkey, at func(int)) {
		xrun(t, k, at, []xallow{
			{0, 1, 1, true},
			{0, 0, 1, false},
			{0, 0, 1, false},
			{1, 1, 1, true},
			{1, 0, 1, false},
			{1, 0, 1, false},
			{2, 1, 2, false}, // burst size is 1, so n=2 always fails
			{2, 1, 1, true},
			{2, 0, 1, false},
		})
	})
}

func TestXRateLimiterBurst3(t *testing.T) {
	xrate(t, 10, 3, func(t *testing.T, k xkey, at func(int)) {
		xrun(t, k, at, []xallow{
			{0, 3, 2, true},
			{0, 1, 2, false},
			{0, 1, 1, true},
			{0, 0, 1, false},
			{1, 1, 4, false},
			{2, 2, 1, true},
			{3, 2, 1, true},
			{4, 2, 1, true},
			{4, 1, 1, true},
			{4, 0, 1, false},
			{4, 0, 1, false},
			{9, 3, 3, true},
			{9, 0, 0, true},
		})
	})
}

// TestLimiterJumpBackwards and TestReserveJumpBack(Cancel) are not
// ported: a Limiter's clock is monotonic and cannot be set back.

func TestXRateSimultaneousRequests(t *testing.T) {
	const limit, burst, requests = 1, 5, 15
	k := (&Limiter{Limits: []Limit{{Rate: limit, Burst: burst}}}).For("")
	var ok atomic.Int32
	var wg sync.WaitGroup
	for range requests {
		wg.Go(func() {
			if k.Allow() {
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	// 15 goroutines within far less than a second: the bucket's 5, and
	// no more (the next unit comes a second after the first).
	if got := ok.Load(); got != burst {
		t.Errorf("%d of %d allowed, want %d", got, requests, burst)
	}
}

// xreserve reserves n at tick t (with a deadline of max ticks from then
// if max ≥ 0) and checks the turn (tick want) or the refusal (want < 0).
func xreserve(t *testing.T, k xkey, at func(int), tt, n, want int, maxT time.Duration) Reservation {
	t.Helper()
	at(tt)
	ctx := context.Background()
	if maxT >= 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, maxT)
		defer cancel()
	}
	r, err := k.ReserveN(ctx, n)
	switch {
	case want < 0 && err == nil:
		t.Errorf("ReserveN(%d) at t%d = turn in %v, want a refusal", n, tt, r.Delay())
	case want >= 0 && err != nil:
		t.Errorf("ReserveN(%d) at t%d: %v, want turn t%d", n, tt, err, want)
	case want >= 0:
		if got := r.Delay(); got != time.Duration(want-tt)*tick {
			t.Errorf("ReserveN(%d) at t%d: delay %v, want %v (t%d)", n, tt, got, time.Duration(want-tt)*tick, want)
		}
	}
	return r
}

const noMax = -1

func TestXRateSimpleReserve(t *testing.T) {
	xrate(t, 10, 2, func(t *testing.T, k xkey, at func(int)) {
		xreserve(t, k, at, 0, 2, 0, noMax)
		xreserve(t, k, at, 0, 2, 2, noMax)
		xreserve(t, k, at, 3, 2, 4, noMax)
	})
}

func TestXRateMix(t *testing.T) {
	xrate(t, 10, 2, func(t *testing.T, k xkey, at func(int)) {
		xreserve(t, k, at, 0, 3, -1, noMax) // n > burst: refused
		xreserve(t, k, at, 0, 2, 0, noMax)
		xrun(t, k, at, []xallow{{1, 1, 2, false}}) // not enough tokens
		xreserve(t, k, at, 1, 2, 2, noMax)
		xrun(t, k, at, []xallow{{1, -1, 1, false}}) // negative tokens
		xrun(t, k, at, []xallow{{3, 1, 1, true}})
	})
}

func TestXRateCancelInvalid(t *testing.T) {
	xrate(t, 10, 2, func(t *testing.T, k xkey, at func(int)) {
		xreserve(t, k, at, 0, 2, 0, noMax)
		xreserve(t, k, at, 0, 3, -1, noMax) // refused: nothing to cancel
		xreserve(t, k, at, 0, 2, 2, noMax)  // did not get extra tokens
	})
}

// TestXRateCancel1Token: x/time/rate's CancelAt(t2) of a reservation
// whose time to act is t2 still restores a token; a Limiter's turn has
// come at t2 (its units went), so Cancel gives nothing back and the last
// reservation waits for units the bucket really gathers: t5, not t4.
func TestXRateCancel1Token(t *testing.T) {
	xrate(t, 10, 2, func(t *testing.T, k xkey, at func(int)) {
		xreserve(t, k, at, 0, 2, 0, noMax)
		r := xreserve(t, k, at, 0, 2, 2, noMax)
		xreserve(t, k, at, 0, 1, 3, noMax)
		at(2)
		r.Cancel() // too late: its turn is now
		xreserve(t, k, at, 2, 2, 5, noMax)
	})
}

// TestXRateCancelMulti: x/time/rate gets 1 + 2 tokens back and puts the
// last reservation at t5, as if C were never reserved; a Limiter gives
// back A's 3 units and C's 1 exactly: B moves up to t1 (it goes then),
// and the last 3 units are gathered by t4.
func TestXRateCancelMulti(t *testing.T) {
	xrate(t, 10, 4, func(t *testing.T, k xkey, at func(int)) {
		xreserve(t, k, at, 0, 4, 0, noMax)
		rA := xreserve(t, k, at, 0, 3, 3, noMax)
		rB := xreserve(t, k, at, 0, 1, 4, noMax)
		rC := xreserve(t, k, at, 0, 1, 5, noMax)
		at(1)
		rC.Cancel()
		rA.Cancel()
		if d := rB.Delay(); d != 0 {
			t.Errorf("B's delay at t1 after A and C cancelled: %v, want 0", d)
		}
		xreserve(t, k, at, 1, 3, 4, noMax)
	})
}

// TestXRateReserveSetLimit: at t2 the bucket has gathered one unit at
// 5/s; at 10/s it keeps it, so the queued 2 units go at t3 and the next
// unit at t4 (x/time/rate: t4, the queued reservation staying at t4).
func TestXRateReserveSetLimit(t *testing.T) {
	xrate(t, 5, 2, func(t *testing.T, k xkey, at func(int)) {
		xreserve(t, k, at, 0, 2, 0, noMax)
		r := xreserve(t, k, at, 0, 2, 4, noMax)
		at(2)
		if err := k.SetLimit(10); err != nil {
			t.Fatal(err)
		}
		if d := r.Delay(); d != tick {
			t.Errorf("queued reservation after SetLimit(10) at t2: delay %v, want %v (t3)", d, tick)
		}
		xreserve(t, k, at, 2, 1, 4, noMax)
	})
}

// TestXRateReserveSetBurst: after the 2 units at t4 the bucket is empty;
// 4 units at 5/s take 8 ticks: t12. x/time/rate answers t9, which its
// own test notes "violates Limit and Burst".
func TestXRateReserveSetBurst(t *testing.T) {
	xrate(t, 5, 2, func(t *testing.T, k xkey, at func(int)) {
		xreserve(t, k, at, 0, 2, 0, noMax)
		xreserve(t, k, at, 0, 2, 4, noMax)
		at(3)
		if err := k.SetBurst(4); err != nil {
			t.Fatal(err)
		}
		xreserve(t, k, at, 3, 4, 12, noMax)
	})
}

func TestXRateReserveSetLimitCancel(t *testing.T) {
	xrate(t, 5, 2, func(t *testing.T, k xkey, at func(int)) {
		xreserve(t, k, at, 0, 2, 0, noMax)
		r := xreserve(t, k, at, 0, 2, 4, noMax)
		at(2)
		if err := k.SetLimit(10); err != nil {
			t.Fatal(err)
		}
		r.Cancel() // 2 units back
		xreserve(t, k, at, 2, 2, 3, noMax)
	})
}

// TestXRateReserveMax: x/time/rate's maxFutureReserve is a ctx's
// deadline here. x/time/rate accepts a turn exactly at its limit; a
// Limiter refuses a turn at the deadline itself (the ctx has ended by
// then: nothing could act on the turn), so the second reservation's
// deadline is a nanosecond past its turn, and the first check is the
// refusal at the deadline.
func TestXRateReserveMax(t *testing.T) {
	xrate(t, 10, 2, func(t *testing.T, k xkey, at func(int)) {
		xreserve(t, k, at, 0, 2, 0, tick)
		xreserve(t, k, at, 0, 1, -1, tick)   // at the deadline: refused
		xreserve(t, k, at, 0, 1, 1, tick+1)  // reserve for close future
		xreserve(t, k, at, 0, 1, -1, tick+1) // time to act too far in the future
	})
}

// xwait waits for n and checks the error and the delay in ticks (exact:
// the bubble's clock has no scheduling slop).
func xwait(t *testing.T, k xkey, ctx context.Context, name string, n, delay int, nilErr bool) {
	t.Helper()
	start := time.Now()
	err := k.WaitN(ctx, n)
	got := time.Since(start)
	if (err == nil) != nilErr || got != time.Duration(delay)*tick {
		t.Errorf("%s: WaitN(%d) = %v after %v; want nil error %v after %v", name, n, err, got, nilErr, time.Duration(delay)*tick)
	}
}

func TestXRateWaitSimple(t *testing.T) {
	xrate(t, 10, 3, func(t *testing.T, k xkey, at func(int)) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		xwait(t, k, ctx, "already-cancelled", 1, 0, false)
		xwait(t, k, t.Context(), "exceed-burst-error", 4, 0, false)
		xwait(t, k, t.Context(), "act-now", 2, 0, true)
		xwait(t, k, t.Context(), "act-later", 3, 2, true)
	})
}

func TestXRateWaitCancel(t *testing.T) {
	xrate(t, 10, 3, func(t *testing.T, k xkey, at func(int)) {
		ctx, cancel := context.WithCancel(t.Context())
		xwait(t, k, ctx, "act-now", 2, 0, true) // 1 token left
		time.AfterFunc(tick, cancel)
		xwait(t, k, ctx, "will-cancel", 3, 1, false)
		// 3 units back: 2 tokens at t1.
		xwait(t, k, t.Context(), "act-now-after-cancel", 2, 0, true)
	})
}

func TestXRateWaitTimeout(t *testing.T) {
	xrate(t, 10, 3, func(t *testing.T, k xkey, at func(int)) {
		ctx, cancel := context.WithTimeout(t.Context(), tick)
		defer cancel()
		xwait(t, k, ctx, "act-now", 2, 0, true)
		xwait(t, k, ctx, "w-timeout-err", 3, 0, false)
	})
}

func TestXRateWaitInf(t *testing.T) {
	xrate(t, rate.Inf, 0, func(t *testing.T, k xkey, at func(int)) {
		xwait(t, k, t.Context(), "exceed-burst-no-error", 3, 0, true)
	})
}

func TestXRateZeroLimit(t *testing.T) {
	k := (&Limiter{Limits: []Limit{{Rate: 0, Burst: 1}}}).For("")
	if !k.Allow() {
		t.Errorf("Limit(0, 1) want true when first used")
	}
	if k.Allow() {
		t.Errorf("Limit(0, 1) want false when already used")
	}
}

func TestXRateSetAfterZeroLimit(t *testing.T) {
	xrate(t, 0, 1, func(t *testing.T, k xkey, at func(int)) {
		if !k.Allow() {
			t.Errorf("Limit(0, 1) want true when first used")
		}
		if k.Allow() {
			t.Errorf("Limit(0, 1) want false when already used")
		}
		if err := k.SetLimit(10); err != nil {
			t.Fatal(err)
		}
		// 10/s: the next unit in 100 ms.
		xwait(t, k, t.Context(), "wait-after-set-nonzero-after-zero", 1, 1, true)
	})
}

func TestXRateTinyLimit(t *testing.T) {
	for _, l := range []rate.Limit{1e-10, 1e-300, math.SmallestNonzeroFloat64} {
		k := (&Limiter{Limits: []Limit{{Rate: l, Burst: 1}}}).For("")
		if !k.Allow() {
			t.Errorf("Limit(%v, 1) want true when first used", l)
		}
		if k.Allow() {
			t.Errorf("Limit(%v, 1) want false when already used", l)
		}
	}
}

// TestZeroRate: the zero Rate is no limit (the zero Limiter, an empty
// override); Limit 0 with a Burst lets the burst through and then
// nothing: a wait with a deadline is refused at once, one without sleeps
// until its ctx ends, and State shows Rate 0 (rate.Inf for no limit).
func TestZeroRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Overrides: map[string][]Limit{"empty": {}, "stop": {{Burst: 3}}}}
		for _, key := range []string{"", "empty", "other"} {
			for i := range 100 {
				if err := l.For(key).WaitN(t.Context(), 5); err != nil {
					t.Fatalf("key %q (no limit), wait %d: %v", key, i, err)
				}
			}
		}
		k := l.For("stop")
		if err := k.WaitN(t.Context(), 3); err != nil {
			t.Fatalf("the burst of a Limit 0 key: %v", err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
		defer cancel()
		var de *DeadlineError
		if err := k.WaitN(ctx, 1); !errors.As(err, &de) {
			t.Errorf("a wait past a Limit 0 key's burst with a deadline: %v, want a *DeadlineError", err)
		}
		ctx2, cancel2 := context.WithCancel(t.Context())
		time.AfterFunc(1000*time.Hour, cancel2)
		start := time.Now()
		if err := k.WaitN(ctx2, 1); !errors.Is(err, context.Canceled) || time.Since(start) != 1000*time.Hour {
			t.Errorf("a wait past a Limit 0 key's burst: %v after %v, want context.Canceled after 1000h", err, time.Since(start))
		}
		if st := keyState(l, "stop"); st.Rate != 0 || st.Tokens != 0 {
			t.Errorf("State of a spent Limit 0 key: Rate %v, Tokens %v; want 0, 0", st.Rate, st.Tokens)
		}
		if got := keyState(l, "empty").Rate; got != rate.Inf {
			t.Errorf("State.Rate of the zero Rate = %v, want rate.Inf", got)
		}
	})
}
