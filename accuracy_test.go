package throttle

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// countingServer is a real API that enforces a token bucket and records
// every arrival, accepted or not.
type countingServer struct {
	*httptest.Server
	lim *rate.Limiter

	mu       sync.Mutex
	arrivals []time.Time
	admitted []time.Time // the accepted arrivals
	accepted int
	rejected int
}

func newCountingServer(t *testing.T, limit rate.Limit, burst int) *countingServer {
	s := &countingServer{lim: rate.NewLimiter(limit, burst)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		ok := s.lim.AllowN(now, 1)
		s.mu.Lock()
		s.arrivals = append(s.arrivals, now)
		if ok {
			s.accepted++
			s.admitted = append(s.admitted, now)
		} else {
			s.rejected++
		}
		s.mu.Unlock()
		if !ok {
			// A bare 429, as many APIs send: no timing to go by.
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		io.WriteString(w, "ok")
	}))
	t.Cleanup(s.Close)
	return s
}

// maxWindow returns the most arrivals in any window of length d.
func maxWindow(arrivals []time.Time, d time.Duration) int {
	ts := append([]time.Time(nil), arrivals...)
	sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	best, lo := 0, 0
	for hi := range ts {
		for ts[hi].Sub(ts[lo]) >= d {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}

// TestTransportAccuracy drives 32 goroutines through a Transport set to the
// server's own limit (100/s, burst 10) for 3 s against a real server.
//
// Bounds: every request finally succeeds; 429s at most 0.5% of requests;
// the steady rate ((accepted - burst) over the time from the first to the
// last accepted arrival while the workers send, since the burst arrives
// at once; a retry after a 429 may arrive after the workers stopped, its
// backoff no part of the pace) within 3% of 100/s; and no 1-second window
// holds more than 110 arrivals (100/s plus the burst).
func TestTransportAccuracy(t *testing.T) {
	if testing.Short() {
		t.Skip("real-clock accuracy run: 3 s")
	}
	const (
		limit    = 100
		burst    = 10
		workers  = 32
		duration = 3 * time.Second
	)
	srv := newCountingServer(t, limit, burst)
	var mu sync.Mutex
	retries := 0
	client := &http.Client{Transport: &Transport{
		Base:   srv.Client().Transport,
		Waiter: &Limiter{Limits: []Limit{{Rate: limit, Burst: burst}}},
		OnEvent: func(e Event) {
			if e.Kind == EventRetry {
				mu.Lock()
				retries++
				mu.Unlock()
			}
		},
	}}
	start := time.Now()
	var wg sync.WaitGroup
	var failed, requests int
	for range workers {
		wg.Go(func() {
			for time.Since(start) < duration {
				resp, err := client.Get(srv.URL)
				mu.Lock()
				requests++
				if err != nil || resp.StatusCode != 200 {
					failed++
				}
				mu.Unlock()
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		})
	}
	wg.Wait()

	srv.mu.Lock()
	defer srv.mu.Unlock()
	arr := append([]time.Time(nil), srv.arrivals...)
	sort.Slice(arr, func(i, j int) bool { return arr[i].Before(arr[j]) })
	var in []time.Time // accepted while the workers sent
	for _, at := range srv.admitted {
		if at.Before(start.Add(duration)) {
			in = append(in, at)
		}
	}
	sort.Slice(in, func(i, j int) bool { return in[i].Before(in[j]) })
	span := in[len(in)-1].Sub(in[0]).Seconds()
	steady := float64(len(in)-burst) / span
	win := maxWindow(arr, time.Second)
	t.Logf("requests %d, failed %d, server accepted %d, rejected %d (%.2f%%), retries %d, steady rate %.2f/s (%.3f of %d/s), max 1-s window %d",
		requests, failed, srv.accepted, srv.rejected, 100*float64(srv.rejected)/float64(len(arr)), retries, steady, steady/limit, limit, win)
	if failed != 0 {
		t.Errorf("%d requests did not finally succeed", failed)
	}
	if rejected := float64(srv.rejected) / float64(len(arr)); rejected > 0.005 {
		t.Errorf("429s were %.2f%% of arrivals; want at most 0.5%%", 100*rejected)
	}
	if steady < 0.97*limit || steady > 1.03*limit {
		t.Errorf("steady rate %.2f/s; want within 3%% of %d/s", steady, limit)
	}
	if win > limit+burst {
		t.Errorf("%d arrivals in one 1-second window; want at most %d", win, limit+burst)
	}
}
