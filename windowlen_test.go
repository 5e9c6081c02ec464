package throttle

import (
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/throttle-go/throttle/ratelimit"
	"github.com/throttle-go/throttle/throttletest"
)

// TestWindowFromResets checks the window told by a policy's resets when
// it states none: the longest reset so far, when it is short.
func TestWindowFromResets(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type resp struct {
		at    time.Duration // from the first response
		reset time.Duration
	}
	tests := []struct {
		name  string
		resps []resp
		want  time.Duration // 0: none yet
	}{
		// A short window is told from the first response.
		{"one response tells a short window", []resp{{0, time.Second}}, time.Second},
		{"a long reset withdraws it", []resp{{0, time.Second}, {1500 * time.Millisecond, 59 * time.Second}}, 0},
		// httprate: the reset is the end of the current second.
		{"a second's window, once a second has passed", []resp{{0, time.Second}, {500 * time.Millisecond, time.Second}, {time.Second, time.Second}}, time.Second},
		{"before it is spanned", []resp{{0, time.Second}, {999 * time.Millisecond, time.Second}}, time.Second},
		// A fixed minute first seen 20 s before its end: 20 s is no
		// window until 20 s have passed, by when the next one began.
		{"a minute first seen near its end", []resp{{0, 20 * time.Second}, {19 * time.Second, time.Second}, {21 * time.Second, 59 * time.Second}, {50 * time.Second, 30 * time.Second}}, 0},
		// … and not told even once the responses span it: a window that
		// long paces the key by what remains until its reset.
		{"a minute is tracked, not told", []resp{{0, 20 * time.Second}, {21 * time.Second, 59 * time.Second}, {59 * time.Second, 21 * time.Second}, {80 * time.Second, time.Second}, {81 * time.Second, 60 * time.Second}}, 0},
		// A rolling window gives its length at every response.
		{"a rolling second", []resp{{0, time.Second}, {300 * time.Millisecond, time.Second}, {time.Second, time.Second}}, time.Second},
		// Resets finer than a second are seen after their window began.
		{"a fine reset rounds up to whole seconds", []resp{{0, 980 * time.Millisecond}, {time.Second, 990 * time.Millisecond}}, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l learned
			var q ratelimit.Reading
			for _, r := range tt.resps {
				q = l.read("api", ratelimit.Reading{Policies: []ratelimit.Policy{{Limit: 50, Remaining: 10, Reset: r.reset,
					HasLimit: true, HasRemaining: true, HasReset: true}}}, "requests", 1, false, t0.Add(r.at))
			}
			p := q.Policies[0]
			switch {
			case tt.want == 0 && p.HasWindow:
				t.Errorf("window %v; want none yet", p.Window)
			case tt.want != 0 && (!p.HasWindow || p.Window != tt.want):
				t.Errorf("window %v (%v); want %v", p.Window, p.HasWindow, tt.want)
			}
		})
	}
}

// TestWindowFromResetsSpent: a spent window is told only once the
// responses span it; before, its reset is the wait (a reset 50 ms away
// read as a window of a second would pace the key at one request in 200
// ms for a limit of 5).
func TestWindowFromResetsSpent(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	read := func(l *learned, at, reset time.Duration, left int64) ratelimit.Policy {
		return l.read("api", ratelimit.Reading{Policies: []ratelimit.Policy{{Limit: 5, Remaining: left, Reset: reset,
			HasLimit: true, HasRemaining: true, HasReset: true}}}, "requests", 1, false, t0.Add(at)).Policies[0]
	}
	var l learned
	if p := read(&l, 0, 50*time.Millisecond, 0); p.HasWindow {
		t.Errorf("a spent window, first response: window %v; want none", p.Window)
	}
	var l2 learned
	read(&l2, 0, time.Second, 3)
	if p := read(&l2, time.Second, time.Second, 0); !p.HasWindow || p.Window != time.Second {
		t.Errorf("a spent window, spanned: window %v (%v); want 1s", p.Window, p.HasWindow)
	}
}

// TestWindowFromResetsKeepsStated checks that a stated window, and a
// refilling bucket's, are left as they are, and that the caller's
// Reading is not changed.
func TestWindowFromResetsKeepsStated(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var l learned
	stated := ratelimit.Policy{Limit: 100, Remaining: 5, Reset: 30 * time.Second, Window: 10 * time.Minute,
		HasLimit: true, HasRemaining: true, HasReset: true, HasWindow: true}
	bare := ratelimit.Policy{Name: "b", Limit: 10, Remaining: 5, Reset: time.Second, HasLimit: true, HasRemaining: true, HasReset: true}
	q := ratelimit.Reading{Policies: []ratelimit.Policy{stated, bare}}
	l.read("api", q, "requests", 1, false, t0)
	got := l.read("api", q, "requests", 1, false, t0.Add(2*time.Second))
	if got.Policies[0] != stated {
		t.Errorf("stated window changed: %+v", got.Policies[0])
	}
	if !got.Policies[1].HasWindow || got.Policies[1].Window != time.Second {
		t.Errorf("bare policy = %+v; want a window of 1s", got.Policies[1])
	}
	if q.Policies[1].HasWindow {
		t.Errorf("the caller's Reading was changed: %+v", q.Policies[1])
	}
}

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
