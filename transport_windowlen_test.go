package throttle

import (
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/throttle-go/throttle/throttletest"
)

// TestWindowFromResets checks the window told by a policy's resets when
// it states none: the longest reset so far, when it is short.
// TestWindowFromResetsSpent: a spent window is told only once the
// responses span it; before, its reset is the wait (a reset 50 ms away
// read as a window of a second would pace the key at one request in 200
// ms for a limit of 5).
// TestWindowFromResetsKeepsStated checks that a stated window, and a
// refilling bucket's, are left as they are, and that the caller's
// Reading is not changed.
// TestTransportWindowFromResets: go-chi/httprate's sliding window of 50 a
// second, X-RateLimit-Limit/-Remaining/-Reset (the end of the current
// second, epoch seconds) and Retry-After: 1, 16 workers, 1,000 requests,
// told nothing, at 8 phases of the server's second. Unpaced, the
// Transport drew 0.46 429s per success (each a second's pause that every
// worker left at once); the window the resets tell declares 50 a second,
// a pace (TestTransportPacedWindow), and what remains caps the bucket.
// Told from the first response (not once the responses span it), the
// window paces the first second as well: 4 of the 8,000 refused, where
// 147 (1.8%) were, nearly all in the first second's burst.
func TestTransportWindowFromResets(t *testing.T) {
	var admitted, refused int
	for phase := range 8 {
		synctest.Test(t, func(t *testing.T) {
			// Epoch seconds of a bubble's clock (2000) would read as delays:
			// move it to the present first (see throttletest's package doc).
			time.Sleep(time.Until(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) + time.Duration(phase)*131*time.Millisecond)
			s := throttletest.NewSlidingWindow(50, time.Second)
			var (
				mu       sync.Mutex
				declared bool
			)
			tr := &Transport{Base: &throttletest.Direct{Handler: s, Latency: time.Millisecond, Jitter: time.Millisecond, Seed: uint64(phase)},
				OnEvent: func(e Event) {
					if e.Kind == EventDeclared {
						mu.Lock()
						declared = true
						mu.Unlock()
					}
				}}
			closedLoopN(t, &http.Client{Transport: tr}, 16, 1000)
			st := s.Stats()
			if st.Admitted != 1000 {
				t.Errorf("phase %d: %d admitted; want all 1000", phase, st.Admitted)
			}
			if float64(st.Rejected) > 0.1*float64(st.Admitted) {
				t.Errorf("phase %d: %d refused for %d admitted; want ≤ 10%% (told nothing: 46%%)", phase, st.Rejected, st.Admitted)
			}
			if !declared {
				t.Errorf("phase %d: no EventDeclared: the window told by the resets declared no pace", phase)
			}
			admitted += st.Admitted
			refused += st.Rejected
		})
	}
	// Told from the first response, the window paces the first second
	// too: 147 refused (1.8%) when it waited to be spanned, 15–24 a phase
	// in the first second.
	if float64(refused) > 0.005*float64(admitted) {
		t.Errorf("%d refused for %d admitted in all; want ≤ 0.5%% (1.8%% when the first second went unpaced)", refused, admitted)
	}
	t.Logf("admitted %d, refused %d (%.1f%%)", admitted, refused, 100*float64(refused)/float64(admitted))
}

// TestTransportPacedWindow: a fixed window of 50 a second announced in
// the IETF fields with t rounded up to whole seconds ("t=1" for a reset
// 0.1 s away), one worker, 1,000 requests, told nothing. The declared
// window is a pace (burst 1): its units spread fill each window exactly,
// and a spent one pauses nothing. Before, the worker sent each window's
// 50 at once and paused to t=1, up to a second past the true reset:
// 21.0 s for what 20 s allow. A waiter with a pace of its own (a
// configured 100/s, faster than the window) is paused by a spent window
// as before, and is not refused.
func TestTransportPacedWindow(t *testing.T) {
	for _, tt := range []struct {
		name    string
		waiter  Waiter
		maxWall time.Duration
	}{
		// 1,000 at 50 a second is 20 s; the first unit goes at once.
		{"told nothing", nil, 20*time.Second + 20*time.Millisecond},
		// Each window's 50 at 100/s, then the pause to t=1; what is
		// checked is that none is refused (no bound on the time).
		{"configured 100/s", &Limiter{Limit: 100, Burst: 10}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				time.Sleep(131 * time.Millisecond) // off the second
				s := throttletest.NewFixedWindow(50, time.Second)
				s.DateSkew = 1500 * time.Millisecond
				tr := &Transport{Waiter: tt.waiter, Base: &throttletest.Direct{Handler: s, Latency: time.Millisecond, Jitter: time.Millisecond, Seed: 1}}
				start := time.Now()
				closedLoopN(t, &http.Client{Transport: tr}, 1, 1000)
				wall := time.Since(start)
				st := s.Stats()
				if st.Rejected > 0 {
					t.Errorf("%d refused; want 0", st.Rejected)
				}
				if tt.maxWall > 0 && wall > tt.maxWall {
					t.Errorf("1,000 took %v; want ≤ %v", wall, tt.maxWall)
				}
				t.Logf("admitted %d, refused %d, in %v", st.Admitted, st.Rejected, wall)
			})
		})
	}
}
