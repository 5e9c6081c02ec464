package throttle

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestBudgetSparesServerPacedRetries checks that retries waiting a
// Retry-After are not cut by the retry budget: 100 concurrent requests
// (all in flight before the first answer), answered 429 with Retry-After: 1 during the first second and 200 after,
// all succeed with one retry each. Found through the OpenAI SDK with
// WithMaxRetries(0): the budget (20% + 10) failed 9 of 20 rate-limited
// calls that the SDK alone would have retried.
func TestBudgetSparesServerPacedRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var attempts, gaveUp atomic.Int32
		all := make(chan struct{}) // closed when the 100 first attempts are in
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if attempts.Add(1) == 100 {
				close(all)
			}
			<-all
			if time.Since(start) < time.Second {
				return respond(r, http.StatusTooManyRequests, "Retry-After", "1"), nil
			}
			return respond(r, http.StatusOK), nil
		})
		tr := &Transport{Base: base, DisableAdaptive: true, OnEvent: func(e Event) {
			if e.Kind == EventGiveUp {
				gaveUp.Add(1)
			}
		}}
		var wg sync.WaitGroup
		var ok atomic.Int32
		for range 100 {
			wg.Go(func() {
				req, _ := http.NewRequest("GET", "http://api.example/x", nil)
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					ok.Add(1)
				}
			})
		}
		wg.Wait()
		if ok.Load() != 100 || attempts.Load() != 200 || gaveUp.Load() != 0 {
			t.Errorf("%d of 100 succeeded in %d attempts, %d given up; want 100 in 200, 0", ok.Load(), attempts.Load(), gaveUp.Load())
		}
	})
}
