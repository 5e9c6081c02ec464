package throttle

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/throttle-go/throttle/throttletest"
)

// ptr returns a pointer to v, for Feedback.Available.
func ptr(v float64) *float64 { return &v }

// feedbackString shows f with what its pointers point to.
func feedbackString(f Feedback) string {
	s := fmt.Sprintf("{Verdict:%v Spent:%d Age:%v Pause:%v Paced:%v", f.Verdict, f.Spent, f.Age, f.Pause, f.Paced)
	if f.Window != nil {
		s += fmt.Sprintf(" Window:%+v", *f.Window)
	}
	if f.Available != nil {
		s += fmt.Sprintf(" Available:%v", *f.Available)
	}
	if f.Declared != nil {
		s += fmt.Sprintf(" Declared:%+v", *f.Declared)
	}
	return s + "}"
}

// closedLoop runs workers that each send a request through c, read its
// answer and send the next, until d has passed; body, if not "", is
// POSTed. It returns when every worker has ended.
func closedLoop(t *testing.T, c *http.Client, workers int, d time.Duration, body string) {
	t.Helper()
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for time.Now().Before(end) {
				method, rd := http.MethodGet, io.Reader(nil)
				if body != "" {
					method, rd = http.MethodPost, strings.NewReader(body)
				}
				req, err := http.NewRequestWithContext(t.Context(), method, "http://api.test/v1", rd)
				if err != nil {
					t.Error(err)
					return
				}
				resp, err := c.Do(req)
				if err != nil {
					continue // counted by the server, or not sent
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
}

// closedLoopN runs workers that send n GETs through c in all, each worker
// its next when its last is answered, and fails the test on a transport
// error. It returns when every request is answered.
func closedLoopN(t *testing.T, c *http.Client, workers, n int) {
	t.Helper()
	var (
		mu   sync.Mutex
		sent int
		wg   sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for {
				mu.Lock()
				sent++
				mine := sent
				mu.Unlock()
				if mine > n {
					return
				}
				resp, err := c.Get("http://api.test/v1?n=" + strconv.Itoa(mine))
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
}

// toPresent moves a bubble's clock from 2000 to 2026, so that epoch-second
// resets read as epochs (see the throttletest package doc).
func toPresent() {
	time.Sleep(time.Until(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
}

// TestTransportLongWindowSpread checks that a long window is paced over
// its whole reset, however far past MaxRetryAfter: GitHub's 450 of 5,000
// left with the reset in 50 minutes, 4 workers. MaxRetryAfter (1 minute)
// used to cap the window too: 33 requests went in the first 4 s, all 450
// by 3m39s, then 403s and give-ups until the reset.
func TestTransportLongWindowSpread(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		toPresent()
		s := throttletest.NewGitHub(5000, time.Hour)
		s.Used, s.ResetIn = 4550, 50*time.Minute
		var (
			mu      sync.Mutex
			giveUps []string
		)
		tr := &Transport{Base: &throttletest.Direct{Handler: s, Latency: 50 * time.Millisecond, Jitter: 10 * time.Millisecond, Seed: 1},
			OnEvent: func(e Event) {
				if e.Kind == EventGiveUp {
					mu.Lock()
					giveUps = append(giveUps, e.Reason)
					mu.Unlock()
				}
			}}
		start := time.Now()
		closedLoop(t, &http.Client{Transport: tr}, 4, 50*time.Minute-time.Second, "")
		var first4s, before int
		for _, at := range s.Admissions() {
			if at.Sub(start) < 4*time.Second {
				first4s++
			}
			if at.Sub(start) < 50*time.Minute {
				before++
			}
		}
		most, _ := s.MaxIn(time.Minute)
		// 450 over 50 minutes is 9 a minute; the spread starts when the
		// window runs low, at the first response, with the few requests
		// sent before it.
		if first4s > 6 || most > 15 {
			t.Errorf("%d admitted in the first 4 s, at most %d in a minute; want ≤ 6 and ≤ 15: the 450 spread over the 50 min", first4s, most)
		}
		if before < 440 {
			t.Errorf("%d of the 450 admitted before the reset; want ≥ 440", before)
		}
		if st := s.Stats(); st.Rejected != 0 || len(giveUps) != 0 {
			t.Errorf("%d refusals, %d give-ups (%.60q…); want none", st.Rejected, len(giveUps), fmt.Sprint(giveUps))
		}
	})
}

// TestTransportRefillingBucket checks OpenAI's limits, buckets that
// refill continuously and whose reset is the time until full: paced at
// their refill rate, a spent bucket pausing the key one unit's refill,
// not until full. 60 requests a minute bind (22 tokens a request, 6,000
// a minute); 8 workers, told nothing. They used to pause the key until
// the bucket was full (up to a minute), then probe one request a second
// while every response said 59 of 60 remain: 0.76 of capacity.
//
// Paced by the declared limit, what the bucket holds caps the key's own
// (Feedback.Available), so it is never found spent and nothing is
// refused; with DisableDeclaredLimits nothing paces the key but the
// pauses of a spent bucket, each one request's refill.
func TestTransportRefillingBucket(t *testing.T) {
	for _, undeclared := range []bool{false, true} {
		t.Run(fmt.Sprintf("DisableDeclaredLimits=%v", undeclared), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := throttletest.NewOpenAI(60, 6000)
				s.PromptTokens = 2
				var (
					mu     sync.Mutex
					pauses []time.Duration
				)
				tr := &Transport{Base: &throttletest.Direct{Handler: s, Latency: 100 * time.Millisecond, Jitter: 10 * time.Millisecond, Seed: 1},
					DisableDeclaredLimits: undeclared,
					OnEvent: func(e Event) {
						if e.Kind == EventPause && e.StatusCode == http.StatusOK {
							mu.Lock()
							pauses = append(pauses, e.Delay)
							mu.Unlock()
						}
					}}
				start := time.Now()
				closedLoop(t, &http.Client{Transport: tr}, 8, 3*time.Minute, `{"max_tokens":20}`)
				wall := time.Since(start)
				capacity := 60 + 60*wall.Minutes() // full, then a request a second
				st := s.Stats()
				if got := float64(st.Admitted) / capacity; got < 0.95 {
					t.Errorf("%d admitted in %v: %.2f of capacity; want ≥ 0.95", st.Admitted, wall, got)
				}
				var gap time.Duration
				adm := s.Admissions()
				for i := 1; i < len(adm); i++ {
					gap = max(gap, adm[i].Sub(adm[i-1]))
				}
				// A request frees every second; a refused one (dispatch jitter
				// of 10 ms against a bucket at its last unit) costs a round trip
				// of 200 ms more before its retry.
				if gap > 1500*time.Millisecond {
					t.Errorf("longest gap between admissions %v; want ≤ 1.5s: a request frees every second", gap)
				}
				for _, p := range pauses {
					if p > time.Second {
						t.Errorf("a 200 paused the key %v; want ≤ 1s, one request's refill", p)
						break
					}
				}
				switch {
				case !undeclared && st.Rejected > 0:
					t.Errorf("%d refused; want 0: the declared pace, capped by what the bucket holds, never meets a spent one", st.Rejected)
				case undeclared && len(pauses) == 0:
					t.Errorf("no 200 said the bucket was spent; the test does not exercise a spent bucket")
				}
				t.Logf("admitted %d, rejected %d, pauses on 200 %d, longest gap %v", st.Admitted, st.Rejected, len(pauses), gap)
			})
		})
	}
}

// TestTransportRetryDelayFloor checks the floor on retry delays: a server
// answering "Retry-After: 0" to every attempt used to see all 5 within a
// millisecond; each retry now waits at least a tenth of InitialInterval.
func TestTransportRetryDelayFloor(t *testing.T) {
	for _, tt := range []struct {
		name    string
		initial time.Duration
		step    time.Duration
	}{
		{"default InitialInterval", 0, 50 * time.Millisecond},
		{"InitialInterval 1s", time.Second, 100 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newScript(status(429, "Retry-After", "0"), status(429, "Retry-After", "0"), status(429, "Retry-After", "0"),
					status(429, "Retry-After", "0"), status(200))
				var ev events
				tr := &Transport{Base: s, OnEvent: ev.add, Retry: RetryPolicy{InitialInterval: tt.initial}}
				resp, err := get(t, tr)
				if err != nil || resp.StatusCode != 200 {
					t.Fatalf("RoundTrip = %v, %v; want the 200", resp, err)
				}
				resp.Body.Close()
				// Each retry waits the floor, then its turn on the key's
				// pace, which the 429s (Retry-After 0 says no pause) slow.
				if len(s.arrivals) != 5 || s.arrivals[1] != tt.step {
					t.Fatalf("attempts at %v; want 5, the second at %v", s.arrivals, tt.step)
				}
				for i := 1; i < len(s.arrivals); i++ {
					if gap := s.arrivals[i] - s.arrivals[i-1]; gap < tt.step {
						t.Errorf("attempts at %v: %v between attempts %d and %d; want ≥ %v", s.arrivals, gap, i, i+1, tt.step)
					}
				}
				for _, e := range ev.of(EventRetry) {
					if e.Delay != tt.step {
						t.Errorf("retry event %+v; want its Delay %v, the floor", e, tt.step)
					}
				}
			})
		})
	}
}

// TestTransportSpentLongWindow checks the two bounds on a wait for a long
// window: the server's 403 whose reset is 50 minutes away is returned at
// once (past MaxRetryAfter), its give-up saying when the quota frees up;
// with MaxWait, the next request fails at once with the wait it would
// have had, nothing sent.
func TestTransportSpentLongWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		toPresent()
		s := throttletest.NewGitHub(5000, time.Hour)
		s.Used, s.ResetIn = 5000, 50*time.Minute
		var ev events
		tr := &Transport{Base: &throttletest.Direct{Handler: s}, OnEvent: ev.add, MaxWait: time.Minute}
		resp, err := get(t, tr)
		if err != nil || resp.StatusCode != http.StatusForbidden {
			t.Fatalf("RoundTrip = %v, %v; want the 403 at once", resp, err)
		}
		resp.Body.Close()
		g := ev.of(EventGiveUp)
		if len(g) != 1 || g[0].Reason != reasonMaxRetryAfter || g[0].Delay < 49*time.Minute || g[0].Delay > 50*time.Minute {
			t.Fatalf("give-ups %+v; want one, %q, its Delay the 50 min to the reset", g, reasonMaxRetryAfter)
		}
		start := time.Now()
		resp, err = get(t, tr)
		var de *DeadlineError
		if err == nil {
			resp.Body.Close()
		}
		if !errors.As(err, &de) || !errors.Is(err, ErrWouldExceedDeadline) || de.Delay < 49*time.Minute || de.Delay > 50*time.Minute || time.Since(start) != 0 {
			t.Errorf("second request: %v, %v after %v; want at once a DeadlineError whose Delay is the ~50 min to the reset", resp, err, time.Since(start))
		}
		if g := ev.of(EventGiveUp); len(g) != 2 || g[1].Reason != reasonMaxWait || g[1].Delay != de.Delay {
			t.Errorf("give-ups %+v; want a second, %q, with the wait", g, reasonMaxWait)
		}
		if st := s.Stats(); st.Arrivals != 1 {
			t.Errorf("server saw %d requests; want 1: the spent window's wait sends nothing", st.Arrivals)
		}
	})
}

// TestTransportSlowDownCountsRequests checks that a bare 429 slows a key
// of costly requests (500 tokens each, no limit configured) to no less
// than a request a second, whatever the cost: the slow-down's floor is
// counted in requests, not units (issue 9 found one 429 making the next
// request wait 60 s). The Transport reports the request's cost with the
// rejection, which the waiter's floor scales by.
//
// It failed while a cut's bucket was one unit deep (τ = max(τ, ci)): a
// request of n units waited for the last one's n as well as its own, and
// 500-token requests at the floor of 500 tokens a second went every
// 1.9 s. A cut's bucket is now a request deep (the largest cost).
func TestTransportSlowDownCountsRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A request every 0.9 s (about 550 tokens a second), then bare
		// 429s: each cuts the pace to 70% of the last, but never below a
		// request a second.
		s := newScript(status(200), status(200), status(200), status(200), status(429), status(429), status(429), status(429), status(200))
		tr := &Transport{Base: s, Waiter: &Limiter{}, CostUnit: "tokens", CostOf: func(*http.Request) Cost { return Cost{N: 500} },
			Retry: RetryPolicy{InitialInterval: time.Millisecond}}
		for range 5 {
			resp, err := get(t, tr)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			time.Sleep(900 * time.Millisecond)
		}
		// The 5th request is refused 4 times: each retry waits its turn at
		// the cut pace, one 500-token request a second at the least.
		if len(s.arrivals) != 9 {
			t.Fatalf("attempts at %v; want 9", s.arrivals)
		}
		for i := 5; i < 9; i++ {
			if gap := s.arrivals[i] - s.arrivals[i-1]; gap > 1010*time.Millisecond {
				t.Errorf("attempts at %v: %v between attempts %d and %d; want ≤ 1.01s: the floor is a request a second, not a unit", s.arrivals, gap, i, i+1)
			}
		}
	})
}
