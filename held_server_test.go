package throttle

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/throttle-go/throttle/throttletest"
)

// TestInFlightServer: cap N, 4N goroutines sending through one Transport
// to a real server that refuses (429) any request past N in flight. The
// server never sees more than N at once, refuses none, and serves close
// to N per hold: a slot comes back as a response body is read to its end,
// and goes to the next request at once.
func TestInFlightServer(t *testing.T) {
	const (
		n       = 5
		hold    = 50 * time.Millisecond
		perG    = 10 // requests per goroutine
		workers = 4 * n
	)
	s := throttletest.NewInFlight(n, hold)
	srv := httptest.NewServer(s)
	defer srv.Close()
	base := &http.Transport{MaxIdleConnsPerHost: workers}
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: &Transport{
		Base:   base,
		Waiter: &Limiter{InFlight: n},
		Retry:  RetryPolicy{MaxAttempts: 1}, // a 429 must show, not be retried away
	}}
	// Connections up before the clock starts: dialing is not what is
	// measured.
	var warm sync.WaitGroup
	for range workers {
		warm.Go(func() {
			if resp, err := base.RoundTrip(mustRequest(t, srv.URL+"/warm")); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	warm.Wait()
	warmStats := s.Stats()

	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range perG {
				resp, err := client.Get(srv.URL)
				if err != nil {
					t.Errorf("Get = %v", err)
					return
				}
				io.Copy(io.Discard, resp.Body) // read to EOF: the slot comes back
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	st := s.Stats()
	got := st.Admitted - warmStats.Admitted
	ideal := float64(n) / hold.Seconds() // requests per second
	ratio := float64(got) / elapsed.Seconds() / ideal
	t.Logf("cap %d, %d goroutines: peak %d in flight, %d admitted, %d refused in %v: %.1f/s, %.3f of N/hold (%.0f/s)",
		n, workers, s.Peak(), got, st.Rejected-warmStats.Rejected, elapsed, float64(got)/elapsed.Seconds(), ratio, ideal)
	if p := s.Peak(); p > n {
		t.Errorf("the server saw %d in flight; want at most %d", p, n)
	}
	if st.Rejected != warmStats.Rejected {
		t.Errorf("the server refused %d requests; want 0", st.Rejected-warmStats.Rejected)
	}
	if got != workers*perG {
		t.Errorf("admitted %d; want %d", got, workers*perG)
	}
	// Each request holds its slot for hold plus a loopback round trip
	// (well under a millisecond, a few under -race on a loaded machine);
	// 0.8 leaves room for that and would still catch a slot returned
	// late (at the next request's wait) or not shared out at once.
	if ratio < 0.8 {
		t.Errorf("throughput %.3f of N/hold; want at least 0.8", ratio)
	}
}

func mustRequest(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}
