package throttle

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// admission is a wait that went: when, and how many units.
type admission struct {
	at time.Duration
	n  int
}

// overSent replays admissions (in any order) through a GCRA bucket of
// rate units a second and burst, and returns a description of the first
// one that a bucket of that shape would not have let go, or "".
func overSent(adm []admission, rate float64, burst int) string {
	s := slices.Clone(adm)
	slices.SortStableFunc(s, func(a, b admission) int { return int(a.at - b.at) })
	interval := float64(time.Second) / rate
	tau := float64(burst) * interval
	tat := 0.0
	for i, a := range s {
		at := float64(a.at)
		tat = max(tat, at) + float64(a.n)*interval
		if tat-at > tau+1 { // 1 ns of rounding
			return fmt.Sprintf("admission %d (%d units at %v) exceeds burst %d at %v/s: bucket owes %v",
				i, a.n, a.at, burst, rate, time.Duration(tat-at-tau))
		}
	}
	return ""
}

// queueWaits starts n waits of one unit on w, one after the other inside
// the bubble, and returns a function that waits for them and returns when
// each went, from start.
func queueWaits(t *testing.T, w Waiter, start time.Time, n int) func() []admission {
	var (
		mu  sync.Mutex
		adm []admission
		wg  sync.WaitGroup
	)
	for range n {
		wg.Go(func() {
			if err := w.WaitN(t.Context(), 1); err != nil {
				t.Error(err)
			}
			mu.Lock()
			adm = append(adm, admission{at: time.Since(start), n: 1})
			mu.Unlock()
		})
		synctest.Wait()
	}
	return func() []admission {
		wg.Wait()
		return adm
	}
}

// countAt returns the most admissions at one instant.
func countAt(adm []admission) int {
	by := map[time.Duration]int{}
	most := 0
	for _, a := range adm {
		by[a.at] += a.n
		most = max(most, by[a.at])
	}
	return most
}

// TestPauseExtendedByRefusalsKeepsPace: through a Transport, ten 429s
// with Retry-After: 2, all in flight at 10/s (burst 1), each extending
// the pause; after the pause, the queue (retries first) goes at 10/s: no
// 500 ms holds more than 1 + 5 requests.
func TestPauseExtendedByRefusalsKeepsPace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var mu sync.Mutex
		var sent []admission
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			at := time.Since(start)
			mu.Lock()
			sent = append(sent, admission{at: at, n: 1})
			mu.Unlock()
			time.Sleep(time.Second) // ten requests in flight at 10/s
			if at < time.Second {
				return respond(r, http.StatusTooManyRequests, "Retry-After", "2"), nil
			}
			return respond(r, http.StatusOK), nil
		})
		tr := &Transport{Base: base, Waiter: &Limiter{Limits: []Limit{{Rate: 10, Burst: 1}}}}
		var wg sync.WaitGroup
		for range 40 {
			wg.Go(func() {
				resp, err := get(t, tr)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("status %d; want 200", resp.StatusCode)
				}
			})
			synctest.Wait()
		}
		wg.Wait()
		worst, from := 0, time.Duration(0)
		for _, a := range sent {
			k := 0
			for _, b := range sent {
				if b.at >= a.at && b.at < a.at+500*time.Millisecond {
					k++
				}
			}
			if k > worst {
				worst, from = k, a.at
			}
		}
		t.Logf("%d attempts; at most %d in the 500 ms from %v", len(sent), worst, from)
		if worst > 6 {
			t.Errorf("%d requests sent in the 500 ms from %v; want at most 6 (1 + 10/s · 0.5 s)", worst, from)
		}
		if msg := overSent(sent, 10, 1); msg != "" {
			t.Error(msg)
		}
	})
}

// TestPausesExtendedHoldQueue: 40 waits queued at 10/s (burst 1 and
// 10), then ten pauses of 2 s 10 ms apart, each extending the last: every
// queued wait is held by all of them, and the queue goes at 10/s from the
// last one's end, never over the bucket.
func TestPausesExtendedHoldQueue(t *testing.T) {
	for _, burst := range []int{1, 10} {
		t.Run(fmt.Sprintf("burst=%d", burst), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := &Limiter{Limits: []Limit{{Rate: 10, Burst: burst}}}
				b := l.For("k")
				start := time.Now()
				done := queueWaits(t, b, start, 40)
				for range 10 {
					time.Sleep(10 * time.Millisecond)
					b.Pause(t.Context(), 2*time.Second)
				}
				end := time.Since(start) + 2*time.Second // 2.1 s
				adm := done()
				if most := countAt(adm); most > burst {
					t.Errorf("%d waits went at one instant; want at most the burst, %d", most, burst)
				}
				if msg := overSent(adm, 10, burst); msg != "" {
					t.Error(msg)
				}
				for _, a := range adm {
					if a.at > 0 && a.at < end {
						t.Errorf("a wait went at %v, inside the pauses (until %v)", a.at, end)
					}
				}
			})
		})
	}
}

// TestPauseExtendedAtItsEnd: a pause extended at the instant the waits
// queued in it are due (its end) lets at most the burst go at once, and
// the queue at 10/s after.
func TestPauseExtendedAtItsEnd(t *testing.T) {
	for _, early := range []time.Duration{0, 1} {
		t.Run(fmt.Sprintf("extended %v before the end", early), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := &Limiter{Limits: []Limit{{Rate: 10, Burst: 10}}}
				b := l.For("k")
				start := time.Now()
				b.Pause(t.Context(), time.Second)
				done := queueWaits(t, b, start, 40)
				time.Sleep(time.Second - early)
				b.Pause(t.Context(), time.Second+early) // to 2 s
				adm := done()
				if most := countAt(adm); most > 10 {
					t.Errorf("%d waits went at one instant; want at most the burst, 10", most)
				}
				if msg := overSent(adm, 10, 10); msg != "" {
					t.Error(msg)
				}
				for _, a := range adm {
					if a.at > time.Second && a.at < 2*time.Second {
						t.Errorf("a wait went at %v, inside the extended pause", a.at)
					}
				}
			})
		})
	}
}
