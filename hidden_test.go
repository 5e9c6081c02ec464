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
// key at its q units until its end: three refusals to learn it, none
// after, and no cycle longer than a refusal's (the window's w is the
// refusal's cycle).
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
		if st.Rejected > 3 {
			t.Errorf("%d refused; want ≤ 3 (the cycles that learn the budget; 19 before)", st.Rejected)
		}
		// 20 cycles of 1.1 s (a burst of 20 at 100/s, burst 10, and the
		// refusal's whole second), less the last cycle's wait.
		if wall > 21500*time.Millisecond {
			t.Errorf("400 admitted in %v; want ≤ 21.5s", wall)
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
				_, _, _, _, ok = h.see(key, time.Now(), sent, 1, false, 0, false)
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
		// response starts it.
		sent := time.Now()
		time.Sleep(ms)
		first := time.Now()
		left, reset, size, length, ok := h.see("b", first, sent, 1, false, 0, false)
		if !ok || left != 19 || reset != w || size != 20 || length != w {
			t.Errorf("first acceptance: window %v, %v, %v, %v, %v; want 19, %v, 20, %v, true", left, reset, size, length, ok, w, w)
		}
		time.Sleep(500 * ms)
		left, reset, _, _, _ = h.see("b", time.Now(), time.Now(), 3, false, 0, false)
		if left != 16 || reset != w-500*ms {
			t.Errorf("4 units in: %v left until %v; want 16, %v", left, reset, w-500*ms)
		}
		// Past the window's end the next acceptance starts a cycle.
		time.Sleep(w)
		left, reset, _, _, _ = h.see("b", time.Now(), time.Now(), 1, false, 0, false)
		if left != 19 || reset != w {
			t.Errorf("past the end: %v left until %v; want 19, %v", left, reset, w)
		}
		// A bare refusal (no Retry-After) ends no cycle.
		h.see("b", time.Now(), time.Now(), 1, true, 0, false)
		if left, _, _, _, _ = h.see("b", time.Now(), time.Now(), 1, false, 0, false); left != 18 {
			t.Errorf("after a bare refusal: %v left; want 18", left)
		}
		// Forgotten hiddenKeep after the last refusal.
		time.Sleep(hiddenKeep)
		if _, _, _, _, ok = h.see("b", time.Now(), time.Now(), 1, false, 0, false); ok {
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
