package throttle

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// windowServer is a real API with fixed windows: size requests per window,
// windows aligned to the server's start. It counts what it accepted and
// rejected, and answers with the headers its dialect sends.
type windowServer struct {
	*httptest.Server
	size   int
	window time.Duration
	start  time.Time
	skew   time.Duration // the server's clock is this far ahead of ours
	header func(h http.Header, s *windowServer, left int, reset time.Time, now time.Time)

	mu       sync.Mutex
	used     map[int64]int // requests accepted per window index
	accepted int
	rejected int
	inRun    int // accepted before the run's end
	runEnd   time.Time
}

func newWindowServer(t *testing.T, size int, window time.Duration, skew time.Duration,
	header func(h http.Header, s *windowServer, left int, reset, now time.Time)) *windowServer {
	s := &windowServer{size: size, window: window, skew: skew, header: header, used: map[int64]int{}}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.start = time.Now()
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func (s *windowServer) serve(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	idx := int64(now.Sub(s.start) / s.window)
	reset := s.start.Add(time.Duration(idx+1) * s.window)
	s.mu.Lock()
	ok := s.used[idx] < s.size
	if ok {
		s.used[idx]++
		s.accepted++
		if s.runEnd.IsZero() || now.Before(s.runEnd) {
			s.inRun++
		}
	} else {
		s.rejected++
	}
	left := s.size - s.used[idx]
	s.mu.Unlock()
	s.header(w.Header(), s, left, reset, now)
	if !ok {
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	io.WriteString(w, "ok")
}

// ceilSeconds rounds d up to whole seconds, as servers do for reset
// fields so that a client is never early.
func ceilSeconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}

// runLoad sends requests from workers goroutines through client until
// d has passed, and returns how many it sent and the longest single
// request (wait included).
func runLoad(client *http.Client, url string, workers int, d time.Duration) (requests int, longest time.Duration) {
	var mu sync.Mutex
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for time.Since(start) < d {
				t0 := time.Now()
				resp, err := client.Get(url)
				took := time.Since(t0)
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				mu.Lock()
				requests++
				longest = max(longest, took)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return requests, longest
}

// TestServerPacingDraftHeaders: a fixed window of 100 per 10 s announced
// with draft-08+ RateLimit and RateLimit-Policy; 32 goroutines, the client
// told no limit, 30 s. 429s at most 1% of requests; each window after the
// first at least 95% used within the run (see checkWindowRun for the
// first).
func TestServerPacingDraftHeaders(t *testing.T) {
	if testing.Short() {
		t.Skip("real-clock run: 30 s")
	}
	t.Parallel()
	const size, window, run = 100, 10 * time.Second, 30 * time.Second
	srv := newWindowServer(t, size, window, 0, func(h http.Header, s *windowServer, left int, reset, now time.Time) {
		h.Set("RateLimit-Policy", fmt.Sprintf(`"fixed";q=%d;w=%d`, s.size, int(s.window/time.Second)))
		h.Set("RateLimit", fmt.Sprintf(`"fixed";r=%d;t=%d`, left, ceilSeconds(reset.Sub(now))))
	})
	srv.runEnd = srv.start.Add(run)
	client := &http.Client{Transport: &Transport{Base: srv.Client().Transport}}
	requests, longest := runLoad(client, srv.URL, 32, run-time.Since(srv.start))
	checkWindowRun(t, srv, requests, 32, longest, 0.01, 0.95, run)
}

// TestServerPacingSkewedDate: the same window announced only with
// X-RateLimit-* and epoch resets, from a server whose clock (and Date) is
// 30 s ahead of ours. Resets are measured against the Date, so no wait is
// 30 s too long: the longest request stays under one window.
func TestServerPacingSkewedDate(t *testing.T) {
	if testing.Short() {
		t.Skip("real-clock run: 30 s")
	}
	t.Parallel()
	const size, window, run = 100, 10 * time.Second, 30 * time.Second
	srv := newWindowServer(t, size, window, 30*time.Second, func(h http.Header, s *windowServer, left int, reset, now time.Time) {
		h.Set("Date", now.Add(s.skew).UTC().Format(http.TimeFormat))
		h.Set("X-RateLimit-Limit", strconv.Itoa(s.size))
		h.Set("X-RateLimit-Remaining", strconv.Itoa(left))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(reset.Add(s.skew).Add(time.Second-1).Unix(), 10))
	})
	srv.runEnd = srv.start.Add(run)
	client := &http.Client{Transport: &Transport{Base: srv.Client().Transport}}
	requests, longest := runLoad(client, srv.URL, 32, run-time.Since(srv.start))
	checkWindowRun(t, srv, requests, 32, longest, 0.01, 0.95, run)
}

// checkWindowRun checks a run against srv: 429s at most max429 of the
// requests; each window after the first admits at least minGoodput of its
// size within the run; and the first at least its size less the workers.
// The first window is told by a response to the first burst of unpaced
// requests (one per worker): its count less the others in flight bounds
// what is left, and those the server had counted already (the first
// response to arrive may have been counted last: the order is the
// network's) are taken off twice. Safe, and at most the burst is lost:
// 0.90–0.99 of the three windows in all, by how the burst's responses
// came back.
func checkWindowRun(t *testing.T, srv *windowServer, requests, workers int, longest time.Duration, max429, minGoodput float64, run time.Duration) {
	t.Helper()
	srv.mu.Lock()
	defer srv.mu.Unlock()
	allowance := srv.size * int(run/srv.window)
	r429 := float64(srv.rejected) / float64(srv.accepted+srv.rejected)
	goodput := float64(srv.inRun) / float64(allowance)
	t.Logf("requests %d: server accepted %d (%d within %v, by window %v), rejected %d (%.2f%%); goodput %.3f of %d; longest request %v",
		requests, srv.accepted, srv.inRun, run, srv.used, srv.rejected, 100*r429, goodput, allowance, longest.Round(time.Millisecond))
	if r429 > max429 {
		t.Errorf("429s were %.2f%% of requests; want at most %.1f%%", 100*r429, 100*max429)
	}
	if got, want := srv.used[0], srv.size-workers; got < want {
		t.Errorf("the first window admitted %d; want at least %d (its size less the first burst)", got, want)
	}
	for idx := int64(1); idx < int64(run/srv.window); idx++ {
		if got := srv.used[idx]; float64(got) < minGoodput*float64(srv.size) {
			t.Errorf("window %d admitted %d; want at least %.0f", idx, got, minGoodput*float64(srv.size))
		}
	}
	// No request waits longer than a window plus 2 s of rounding (resets
	// and Date in whole seconds): a reset read against the wrong clock
	// would add the skew, 30 s.
	if lim := srv.window + 2*time.Second; longest > lim {
		t.Errorf("a request took %v; want at most %v", longest, lim)
	}
}

// TestServerPacingBare429: a server enforcing 50 req/s (token bucket,
// burst 5) that answers bare 429s, no headers; the client told no limit,
// 32 goroutines. The client learns the pace in the first 10 s (its first
// 32 requests go at once, and most are rejected); after 10 s, over the
// next 10 s: 429s under 5% of arrivals and goodput at least 85% of the
// server's allowance (50/s). The whole run's figures are logged too.
func TestServerPacingBare429(t *testing.T) {
	if testing.Short() {
		t.Skip("real-clock run: 20 s")
	}
	t.Parallel()
	const limit, burst, warm, run = 50, 5, 10 * time.Second, 20 * time.Second
	lim := rate.NewLimiter(limit, burst)
	var mu sync.Mutex
	accepted, rejected := 0, 0 // over the whole run
	lateAcc, lateRej := 0, 0   // from warm to run
	start := time.Now()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok := lim.Allow()
		since := time.Since(start)
		late := since >= warm && since < run
		mu.Lock()
		switch {
		case ok && late:
			lateAcc++
		case late:
			lateRej++
		}
		if ok {
			accepted++
		} else {
			rejected++
		}
		mu.Unlock()
		if !ok {
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	client := &http.Client{Transport: &Transport{Base: srv.Client().Transport}}
	requests, _ := runLoad(client, srv.URL, 32, run)
	mu.Lock()
	defer mu.Unlock()
	t.Logf("whole run: requests %d, server accepted %d, rejected %d (%.2f%% of arrivals); goodput %.3f of %.0f",
		requests, accepted, rejected, 100*float64(rejected)/float64(accepted+rejected),
		float64(accepted)/(limit*run.Seconds()+burst), limit*run.Seconds()+burst)
	r429 := float64(lateRej) / float64(lateAcc+lateRej)
	allowance := float64(limit) * (run - warm).Seconds()
	goodput := float64(lateAcc) / allowance
	t.Logf("after %v: accepted %d, rejected %d (%.2f%% of arrivals); goodput %.3f of %.0f",
		warm, lateAcc, lateRej, 100*r429, goodput, allowance)
	if r429 >= 0.05 {
		t.Errorf("after %v, 429s were %.2f%% of arrivals; want under 5%%", warm, 100*r429)
	}
	if goodput < 0.85 {
		t.Errorf("after %v, goodput %.3f of the allowance; want at least 0.85", warm, goodput)
	}
}
