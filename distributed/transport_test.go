package distributed

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/throttle-go/throttle"
)

// fixedWindow is an API with fixed windows of size requests per window,
// aligned to its start, that announces them with the IETF draft's
// RateLimit-Policy and RateLimit fields (reset in whole seconds, rounded
// up, as servers do so that a client is never early).
type fixedWindow struct {
	*httptest.Server
	size   int
	window time.Duration
	start  time.Time
	runEnd time.Time

	mu       sync.Mutex
	used     map[int64]int           // accepted per window index
	first    map[int64]time.Duration // each window's first acceptance, from its start
	accepted int                     // before runEnd
	late     int                     // accepted after runEnd
	rejected int
}

func newFixedWindow(t *testing.T, size int, window, run time.Duration) *fixedWindow {
	s := &fixedWindow{size: size, window: window, used: map[int64]int{}, first: map[int64]time.Duration{}}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.start = time.Now()
	s.runEnd = s.start.Add(run)
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func (s *fixedWindow) serve(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	idx := int64(now.Sub(s.start) / s.window)
	reset := s.start.Add(time.Duration(idx+1) * s.window)
	s.mu.Lock()
	ok := s.used[idx] < s.size
	if _, seen := s.first[idx]; ok && !seen {
		s.first[idx] = now.Sub(s.start) - time.Duration(idx)*s.window
	}
	switch {
	case ok && now.Before(s.runEnd):
		s.used[idx]++
		s.accepted++
	case ok:
		s.used[idx]++
		s.late++
	default:
		s.rejected++
	}
	left := s.size - s.used[idx]
	s.mu.Unlock()
	w.Header().Set("RateLimit-Policy", fmt.Sprintf(`"w";q=%d;w=%d`, s.size, int(s.window/time.Second)))
	w.Header().Set("RateLimit", fmt.Sprintf(`"w";r=%d;t=%d`, left, (reset.Sub(now)+time.Second-1)/time.Second))
	if !ok {
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	io.WriteString(w, "ok")
}

// TestTransportFleetWindow: two workers, each a throttle.Transport with 16
// goroutines and its own Limiter and Redis client, share one distributed
// quota (same name, same Redis) in front of an API that allows 50
// requests per 2 s window (5 s with THROTTLE_LONG=1). The Limiter is
// configured at a generous 1000/s, so only what the server says paces the
// fleet: each response's window goes to the shared hash (Observe), every
// reservation of either worker spends from it, and a spent window holds
// both workers until its reset. Over 3 windows (150 requests allowed):
// 429s at most 1% of the arrivals, goodput (accepted within the run) at
// least 95% of the allowance, and each worker at least a quarter of it.
func TestTransportFleetWindow(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("real-clock run: 6 s")
	}
	s, _ := startRedis(t)
	const size, goroutines = 50, 16
	window := 2 * time.Second
	if longRun() {
		window = 5 * time.Second
	}
	run := 3 * window
	api := newFixedWindow(t, size, window, run)
	var (
		mu       sync.Mutex
		requests int
		pauses   int
		longest  time.Duration
		wg       sync.WaitGroup
		ok       [2]int // 200s per worker
	)
	for i := range 2 {
		q := New(newClient(t, s.Addr()), "transport-fleet", throttle.Limit{Rate: 1000, Burst: 50})
		q.Timeout = time.Second // a busy machine is no outage
		client := &http.Client{Transport: &throttle.Transport{
			Base:   api.Client().Transport,
			Waiter: q,
			OnEvent: func(e throttle.Event) {
				if e.Kind == throttle.EventPause {
					mu.Lock()
					pauses++
					mu.Unlock()
				}
			},
		}}
		for range goroutines {
			wg.Go(func() {
				for time.Now().Before(api.runEnd) {
					t0 := time.Now()
					resp, err := client.Get(api.URL)
					took := time.Since(t0)
					mu.Lock()
					if err == nil {
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode == http.StatusOK {
							ok[i]++
						}
					}
					requests++
					longest = max(longest, took)
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	api.mu.Lock()
	defer api.mu.Unlock()
	allowance := size * int(run/window)
	arrivals := api.accepted + api.late + api.rejected
	r429 := float64(api.rejected) / float64(arrivals)
	goodput := float64(api.accepted) / float64(allowance)
	var windows []string
	for i := range int64(run/window) + 1 {
		windows = append(windows, fmt.Sprintf("%d from +%v", api.used[i], api.first[i].Round(time.Millisecond)))
	}
	t.Logf("2 workers × %d goroutines, %v: %d requests, %d arrivals; accepted %d within the run (+%d after), rejected %d (%.2f%% of arrivals); goodput %.3f of %d; %d pause events; longest request %v; 200s per worker %v; accepted per window %v",
		goroutines, run, requests, arrivals, api.accepted, api.late, api.rejected, 100*r429, goodput, allowance, pauses, longest.Round(time.Millisecond), ok, windows)
	if r429 > 0.01 {
		t.Errorf("429s were %.2f%% of arrivals; want at most 1%%", 100*r429)
	}
	if goodput < 0.95 {
		t.Errorf("goodput %.3f of the allowance; want at least 0.95", goodput)
	}
	// Neither worker is starved: both look again when the probe's answer
	// is due, not only the one whose goroutine sent it.
	for i, n := range ok {
		if n < api.accepted/4 {
			t.Errorf("worker %d got %d of the %d accepted requests; want at least a quarter", i, n, api.accepted)
		}
	}
}
