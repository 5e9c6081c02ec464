package throttletest_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/throttle-go/throttle/throttletest"
)

// counted is what every server of the package is: a handler with a Counter.
type counted interface {
	http.Handler
	Stats() throttletest.Stats
	MaxIn(time.Duration) (int, time.Time)
	PerWorker() map[string]int
}

// TestConcurrent hammers each server from 8 goroutines through a real
// httptest server and checks, under -race, that every arrival is counted
// once and the rule's bound holds on the server's own record.
func TestConcurrent(t *testing.T) {
	tests := []struct {
		name string
		srv  counted
		d    time.Duration // the rule: at most most admissions in any d
		most int
	}{
		{"LeakyBucket", throttletest.NewLeakyBucket(100), 10 * time.Millisecond, 2}, // whole ms: 10 ms apart can look 9.x apart
		{"SlidingWindow", throttletest.NewSlidingWindow(20, time.Second), time.Second, 40},
		{"FixedWindow", throttletest.NewFixedWindow(20, time.Second), time.Second, 40},
		{"SlidingLog", throttletest.NewSlidingLog(20, time.Second), time.Second, 20},
		{"GitHub", throttletest.NewGitHub(20, time.Hour), time.Hour, 20},
		{"OpenAI", throttletest.NewOpenAI(20, 1000), time.Second, 20},
		{"TokenBucket", throttletest.NewTokenBucket(20, 5), time.Second, 25},
		{"InFlight", throttletest.NewInFlight(3, 5*time.Millisecond), time.Hour, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := httptest.NewServer(tt.srv)
			defer ts.Close()
			const workers, each = 8, 25
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for w := range workers {
				wg.Go(func() {
					for range each {
						req, _ := http.NewRequest(http.MethodPost, ts.URL, strings.NewReader(`{"max_tokens":10}`))
						req.Header.Set(throttletest.WorkerHeader, string(rune('a'+w)))
						resp, err := ts.Client().Do(req)
						if err != nil {
							errs <- err
							return
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			st := tt.srv.Stats()
			if st.Arrivals != workers*each || st.Admitted+st.Rejected != st.Arrivals || st.Admitted == 0 {
				t.Errorf("Stats() = %+v; want %d arrivals, each admitted or rejected, some admitted", st, workers*each)
			}
			if most, from := tt.srv.MaxIn(tt.d); most > tt.most {
				t.Errorf("MaxIn(%v) = %d from %v; the rule allows %d", tt.d, most, from, tt.most)
			}
			if p, ok := tt.srv.(interface{ Peak() int }); ok && p.Peak() > 3 {
				t.Errorf("Peak() = %d; the cap is 3", p.Peak())
			}
			sum := 0
			for _, n := range tt.srv.PerWorker() {
				sum += n
			}
			if sum != st.Admitted {
				t.Errorf("PerWorker sums to %d; want %d admitted", sum, st.Admitted)
			}
		})
	}
}

// TestZeroValues checks that a server not made by its constructor says so
// (500, naming the constructor) and counts nothing, and that no zero
// value panics.
func TestZeroValues(t *testing.T) {
	for _, s := range []counted{
		&throttletest.LeakyBucket{}, &throttletest.SlidingWindow{}, &throttletest.FixedWindow{},
		&throttletest.SlidingLog{}, &throttletest.GitHub{}, &throttletest.OpenAI{},
		&throttletest.TokenBucket{}, &throttletest.InFlight{},
	} {
		a := send(t, s, "")
		if a.status != 500 || !strings.Contains(a.body, "make it with New") {
			t.Errorf("%T{}: %d %q; want 500 naming the constructor", s, a.status, a.body)
		}
		if st := s.Stats(); st != (throttletest.Stats{}) {
			t.Errorf("%T{}: Stats() = %+v; want nothing counted", s, st)
		}
	}
}
