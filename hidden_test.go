package throttle

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/throttle-go/throttle/throttletest"
)

// TestTransportHiddenBudget is a rolling budget of 20 a second that
// refuses with a 429 and Retry-After only (a sliding log), met by a
// Transport told 100/s, burst 10: 8 workers, 400 requests. Each cycle
// bursts into the budget and takes a refusal, whose pause ends it: 19
// refusals before the budget was learned (0.05 per success). Learned
// from the cycles after the first refusal, the budget's window holds the
// key at its q units until its end: three refusals to learn it. Its
// window, read from the refusals' cycles, is 1.11 s (the configured pace
// spreads each burst over 0.11 s: 21.3 s for the 400, 1.12× the budget's
// 19 s); probes below it find it within hiddenTight, at the cost of a
// refusal or two, none of a pause.
func TestTransportHiddenBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := throttletest.NewSlidingLog(20, time.Second)
		tr := &Transport{Waiter: &Limiter{Limit: 100, Burst: 10},
			Base: &throttletest.Direct{Handler: s, Latency: time.Millisecond, Jitter: time.Millisecond, Seed: 1}}
		start := time.Now()
		closedLoopN(t, &http.Client{Transport: tr}, 8, 400)
		wall := time.Since(start)
		st := s.Stats()
		if st.Admitted != 400 {
			t.Errorf("%d admitted; want 400", st.Admitted)
		}
		if st.Rejected > 5 {
			t.Errorf("%d refused; want ≤ 5 (the cycles that learn the budget, and probes; 19 before)", st.Rejected)
		}
		// Within 5% of the budget's time: 19 windows of 1 s after the
		// first.
		if wall > 19950*time.Millisecond {
			t.Errorf("400 admitted in %v; want ≤ 19.95s", wall)
		}
		t.Logf("admitted %d, refused %d, in %v", st.Admitted, st.Rejected, wall)
	})
}

// TestTransportHiddenBudgetToldNothing: the same budget met by a
// Transport told nothing, 32 workers: each cycle sent every worker's
// request at once into the spent budget (589 refused, 7 requests given
// up on the retry budget). Learned, only the three cycles that learn it
// refuse what is in flight, and since nothing but the server spreads a
// burst, the refusal's Retry-After bounds the window tightly: the run
// takes the budget's time.
func TestTransportHiddenBudgetToldNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := throttletest.NewSlidingLog(20, time.Second)
		tr := &Transport{Base: &throttletest.Direct{Handler: s, Latency: time.Millisecond, Jitter: time.Millisecond, Seed: 1}}
		start := time.Now()
		closedLoopN(t, &http.Client{Transport: tr}, 32, 400)
		wall := time.Since(start)
		st := s.Stats()
		if st.Admitted != 400 || st.Rejected > 4*32 || wall > 19500*time.Millisecond {
			t.Errorf("%d admitted, %d refused in %v; want 400, ≤ 128 (what is in flight in the cycles that learn it), ≤ 19.5s", st.Admitted, st.Rejected, wall)
		}
		t.Logf("admitted %d, refused %d, in %v", st.Admitted, st.Rejected, wall)
	})
}

// TestHiddenBudgetCycles drives the learner with cycles: it learns only
// from two cycles in a row that agree, takes the smaller q and w, counts
// the cycle's units, restarts the cycle at the first acceptance past the
// window's end, forgets a key whose responses state a limit, and forgets
// a budget hiddenKeep after the last refusal.
func TestHiddenBudgetCycles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var h hidden
		const ms = time.Millisecond
		// cycle accepts n units one ms apart from now, then a refusal
		// with Retry-After ra; it returns whether the last acceptance
		// carried a window.
		cycle := func(key string, n int, ra time.Duration) (ok bool) {
			for range n {
				sent := time.Now()
				time.Sleep(ms)
				_, _, _, _, ok, _ = h.see(key, time.Now(), sent, 1, false, 0, false)
			}
			h.see(key, time.Now(), time.Now(), 1, true, ra, false)
			time.Sleep(ra)
			return ok
		}
		// Acceptances before any refusal remember nothing.
		h.see("a", time.Now(), time.Now(), 1, false, 0, false)
		if len(h.keys) != 0 {
			t.Fatalf("%d keys remembered before any refusal; want 0", len(h.keys))
		}
		// Jitter against a bucket with no slack: refusals after 500, then
		// 1,300 units. No budget.
		cycle("a", 0, time.Second) // the first refusal: remembered from here
		cycle("a", 500, time.Second)
		if cycle("a", 1300, time.Second) {
			t.Errorf("a window after cycles of 500 and 1,300 units")
		}
		if _, _, ok := h.keys["a"].budget(); ok {
			t.Errorf("a budget from cycles of 500 and 1,300 units")
		}
		// A budget: 21 then 20 units (a ms each), Retry-After 1 s.
		cycle("b", 0, time.Second)
		cycle("b", 21, time.Second)
		cycle("b", 20, time.Second)
		q, w, ok := h.keys["b"].budget()
		// w: the refusal 20 ms after the first unit was sent, and a
		// second: 1.02 s (1.021 s for the cycle of 21).
		if !ok || q != 20 || w != 1020*ms {
			t.Fatalf("budget = %v, %v, %v; want 20, 1.02s, true", q, w, ok)
		}
		// The next cycle counts down from the first acceptance, whose
		// response starts it. Its window is told a step below w: the
		// refusals put it after 20 ms (a refusal sent 20 ms after the
		// first unit's answer, Retry-After 1 s rounded up), far below w,
		// so the cycle probes hiddenStep of w earlier.
		w = w - w/32 // 988.125 ms
		sent := time.Now()
		time.Sleep(ms)
		first := time.Now()
		left, reset, size, length, ok, _ := h.see("b", first, sent, 1, false, 0, false)
		if !ok || left != 19 || reset != w || size != 20 || length != w {
			t.Errorf("first acceptance: window %v, %v, %v, %v, %v; want 19, %v, 20, %v, true", left, reset, size, length, ok, w, w)
		}
		time.Sleep(500 * ms)
		left, reset, _, _, _, _ = h.see("b", time.Now(), time.Now(), 3, false, 0, false)
		if left != 16 || reset != w-500*ms {
			t.Errorf("4 units in: %v left until %v; want 16, %v", left, reset, w-500*ms)
		}
		// Past the window's end the next acceptance starts a cycle.
		time.Sleep(w)
		left, reset, _, _, _, _ = h.see("b", time.Now(), time.Now(), 1, false, 0, false)
		if left != 19 || reset != w {
			t.Errorf("past the end: %v left until %v; want 19, %v", left, reset, w)
		}
		// A bare refusal (no Retry-After) ends no cycle.
		h.see("b", time.Now(), time.Now(), 1, true, 0, false)
		if left, _, _, _, _, _ = h.see("b", time.Now(), time.Now(), 1, false, 0, false); left != 18 {
			t.Errorf("after a bare refusal: %v left; want 18", left)
		}
		// Forgotten hiddenKeep after the last refusal.
		time.Sleep(hiddenKeep)
		if _, _, _, _, ok, _ = h.see("b", time.Now(), time.Now(), 1, false, 0, false); ok {
			t.Errorf("a window %v after the last refusal", hiddenKeep)
		}
		// A response that states a limit forgets the key.
		cycle("c", 0, time.Second)
		h.see("c", time.Now(), time.Now(), 1, false, 0, true)
		if _, ok := h.keys["c"]; ok {
			t.Errorf("a key whose response stated a limit is remembered")
		}
		// Memory: at most learnedKeys keys.
		for i := range learnedKeys + 10 {
			h.see(strconv.Itoa(i), time.Now(), time.Now(), 1, true, time.Second, false)
		}
		if len(h.keys) > learnedKeys {
			t.Errorf("%d keys remembered; want ≤ %d", len(h.keys), learnedKeys)
		}
	})
}

// TestHiddenBudgetLocalOnly: a waiter that is not an in-process Limiter's
// key (a shared quota's, here a Pauser-only waiter) is told no window: a
// process's share of a budget is not the budget.
func TestHiddenBudgetLocalOnly(t *testing.T) {
	var tr Transport
	var f Feedback
	w := pauserOnly{}
	for range 4 {
		tr.hiddenBudget(&f, w, "k", time.Now(), time.Now(), true, true, time.Second, false)
	}
	if len(tr.hidden.keys) != 0 || f.HasRemaining {
		t.Errorf("a non-Limiter waiter's key learned: %d keys, window %v", len(tr.hidden.keys), f.HasRemaining)
	}
}

type pauserOnly struct{}

func (pauserOnly) WaitN(context.Context, int) error           { return nil }
func (pauserOnly) Pause(context.Context, time.Duration) error { return nil }

// TestHiddenBudgetBounds drives the learner's probes: each cycle of a
// learned budget is told a window a step below the upper bound hi; a
// probe accepted after a cycle that spent the budget lowers hi to its
// answer less the cycle's first send; one refused raises lo to its send
// less the cycle's first answer and says the key's pause ends at first +
// hi, where the next cycle begins; the window is then told at the
// middle of (lo, hi], and at hi once the interval is within hiddenTight
// of it. A refusal of a unit sent at or after first + hi contradicts the
// bounds: it is no probe, and they are dropped.
func TestHiddenBudgetBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var h hidden
		const ms = time.Millisecond
		// accept sends n units one ms apart, each answered a ms later;
		// it returns the last answer's window.
		accept := func(n int) (left float64, reset time.Duration, length time.Duration, ok bool) {
			for range n {
				sent := time.Now()
				time.Sleep(ms)
				left, reset, _, length, ok, _ = h.see("k", time.Now(), sent, 1, false, 0, false)
			}
			return left, reset, length, ok
		}
		refuse := func() (reset, length time.Duration, ok, probe bool) {
			sent := time.Now()
			time.Sleep(ms)
			_, reset, _, length, ok, probe = h.see("k", time.Now(), sent, 1, true, time.Second, false)
			return reset, length, ok, probe
		}
		// Learn 20 per 1.02 s (see TestHiddenBudgetCycles): the cycles'
		// refusals put the window after 20 ms − 1 ms (their send, less the
		// first unit's answer) and no later than 1.021 s (their answer +
		// 1 s, less the first unit's send).
		refuse()
		time.Sleep(time.Second)
		for range 2 {
			accept(20)
			refuse()
			time.Sleep(time.Second)
		}
		hi := 1021 * ms
		if q, lo, h1, ok := h.keys["k"].bounds(); !ok || q != 20 || lo != 19*ms || h1 != hi {
			t.Fatalf("bounds = %v, %v, %v, %v; want 20, 19ms, %v, true", q, lo, h1, ok, hi)
		}
		// A cycle that spends the budget, told hiddenStep of hi earlier.
		w := hi - hi/32
		first := time.Now().Add(ms)
		if _, _, length, ok := accept(20); !ok || length != w {
			t.Fatalf("cycle told %v, %v; want %v", length, ok, w)
		}
		// Its probe at first + w, accepted: hi is its answer less the
		// cycle's first send, 2 ms more than w.
		time.Sleep(first.Add(w).Sub(time.Now()))
		first = time.Now().Add(ms)
		hi = w + 2*ms
		w = hi - hi/32
		if left, reset, length, ok := accept(1); !ok || left != 19 || reset != w || length != w {
			t.Fatalf("after an accepted probe: %v left until %v of %v, %v; want 19 until %v of %v", left, reset, length, ok, w, w)
		}
		if b := h.keys["k"]; b.hi != hi {
			t.Errorf("hi = %v after the accepted probe; want %v", b.hi, hi)
		}
		// The rest of the cycle, then its probe at first + w, refused:
		// lo is its send less first, and the pause ends at first + hi
		// (where the Retry-After of a second would end later).
		accept(19)
		time.Sleep(first.Add(w).Sub(time.Now()))
		reset, length, ok, probe := refuse()
		if !ok || !probe || length != hi || reset != first.Add(hi).Sub(time.Now()) {
			t.Fatalf("refused probe: reset %v, length %v, %v, probe %v; want reset %v, length %v, a probe", reset, length, ok, probe, first.Add(hi).Sub(time.Now()), hi)
		}
		lo := w
		if b := h.keys["k"]; b.lo != lo || !b.open {
			t.Errorf("after the refused probe: lo %v, open %v; want %v, true", b.lo, b.open, lo)
		}
		// The next cycle, from first + hi: (lo, hi] is wider than
		// hiddenTight of hi, and its middle is later than a step below hi.
		time.Sleep(first.Add(hi).Sub(time.Now()))
		first = time.Now().Add(ms)
		w = lo + (hi-lo)/2
		if w <= hi-hi/32 || float64(hi-lo) <= hiddenTight*float64(hi) {
			t.Fatalf("test setup: the middle %v is not the later, or (%v, %v] is tight", w, lo, hi)
		}
		if _, _, length, ok := accept(20); !ok || length != w {
			t.Fatalf("after the refused probe: cycle told %v, %v; want the middle %v", length, ok, w)
		}
		// Its probes, accepted, halve the interval until it is within
		// hiddenTight of hi: the next cycle is told hi.
		for i := 0; ; i++ {
			if i == 4 {
				t.Fatalf("(%v, %v] not within hiddenTight after 4 probes", lo, hi)
			}
			time.Sleep(first.Add(w).Sub(time.Now()))
			first = time.Now().Add(ms)
			hi = w + 2*ms
			tight := float64(hi-lo) <= hiddenTight*float64(hi)
			want := lo + (hi-lo)/2
			if tight {
				want = hi
			}
			if _, _, length, ok := accept(20); !ok || length != want {
				t.Fatalf("(%v, %v]: cycle told %v, %v; want %v", lo, hi, length, ok, want)
			}
			if w = want; tight {
				break
			}
		}
		// A unit sent at first + hi, refused: no probe (the bounds are
		// wrong), the cycle ends, and the probes' bounds are dropped.
		time.Sleep(first.Add(hi).Sub(time.Now()))
		if _, _, _, probe := refuse(); probe {
			t.Errorf("a refusal at first + hi read as a probe's")
		}
		if b := h.keys["k"]; b.lo != 0 || b.hi != 0 || b.open {
			t.Errorf("after a refusal at first + hi: lo %v, hi %v, open %v; want 0, 0, false", b.lo, b.hi, b.open)
		}
	})
}

// TestHiddenBudgetProbeLongPause: a probe refused with a Retry-After that
// puts the reset past the cycle's first answer + hi even rounded (3 s,
// so after 2 s more) is no probe: the bounds are wrong, the server's
// pause stands (no window shortens it), and the cycle ends.
func TestHiddenBudgetProbeLongPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var h hidden
		const ms = time.Millisecond
		see := func(refused bool, pause time.Duration) (ok, probe bool) {
			sent := time.Now()
			time.Sleep(ms)
			_, _, _, _, ok, probe = h.see("k", time.Now(), sent, 1, refused, pause, false)
			return ok, probe
		}
		// learn learns 20 per 1.021 s, as TestHiddenBudgetBounds does,
		// then spends a cycle's 20, and returns its first answer.
		learn := func() time.Time {
			see(true, time.Second)
			time.Sleep(time.Second)
			for range 2 {
				for range 20 {
					see(false, 0)
				}
				see(true, time.Second)
				time.Sleep(time.Second)
			}
			first := time.Now().Add(ms)
			for range 20 {
				see(false, 0)
			}
			return first
		}
		first := learn()
		w := h.keys["k"].w
		if w <= 0 || w >= 1021*ms {
			t.Fatalf("cycle told %v; want a probe below 1.021s", w)
		}
		time.Sleep(first.Add(w).Sub(time.Now()))
		if ok, probe := see(true, 3*time.Second); ok || probe {
			t.Errorf("a probe refused with Retry-After 3s: window %v, probe %v; want neither", ok, probe)
		}
		if b := h.keys["k"]; b.open || b.lo != 0 || b.hi != 0 {
			t.Errorf("after it: open %v, lo %v, hi %v; want false, 0, 0", b.open, b.lo, b.hi)
		}
		// The same probe with Retry-After 1 s is one.
		delete(h.keys, "k")
		first = learn()
		time.Sleep(first.Add(w).Sub(time.Now()))
		if ok, probe := see(true, time.Second); !ok || !probe {
			t.Errorf("a probe refused with Retry-After 1s: window %v, probe %v; want both", ok, probe)
		}
	})
}
