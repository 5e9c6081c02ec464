package throttle

import (
	"net/http"
	"sync"
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
// 19 s); probes below it find it to the step where one is refused, which
// costs its refusal but no pause: its pause event says so (a few ms, not
// the Retry-After's second).
func TestTransportHiddenBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := throttletest.NewSlidingLog(20, time.Second)
		var mu sync.Mutex
		var short []time.Duration // pauses shorter than the Retry-After
		tr := &Transport{Waiter: &Limiter{Limits: []Limit{{Rate: 100, Burst: 10}}},
			Base: &throttletest.Direct{Handler: s, Latency: time.Millisecond, Jitter: time.Millisecond, Seed: 1},
			OnEvent: func(e Event) {
				if e.Kind == EventPause && e.Delay < time.Second {
					mu.Lock()
					short = append(short, e.Delay)
					mu.Unlock()
				}
			}}
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
		if len(short) != 1 || short[0] > 50*time.Millisecond {
			t.Errorf("pauses shorter than the Retry-After: %v; want one of a few ms (the refused probe's)", short)
		}
		t.Logf("admitted %d, refused %d, in %v; pauses ended early %v", st.Admitted, st.Rejected, wall, short)
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
