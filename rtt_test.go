package throttle

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestRoundTrips checks the estimate: the fastest of the current and the
// previous period, forgotten after two.
func TestRoundTrips(t *testing.T) {
	var r roundTrips
	t0 := time.Unix(1000*int64(rttPeriod/time.Second), 0) // a period's start
	steps := []struct {
		at      time.Duration // since t0
		observe time.Duration // 0: none
		want    time.Duration
	}{
		{0, 0, 0},
		{0, 300 * time.Millisecond, 300 * time.Millisecond},
		{time.Second, 100 * time.Millisecond, 100 * time.Millisecond},
		{2 * time.Second, 200 * time.Millisecond, 100 * time.Millisecond},
		{rttPeriod, 0, 100 * time.Millisecond},                                    // the previous period's
		{rttPeriod + time.Second, 400 * time.Millisecond, 100 * time.Millisecond}, // still
		{2 * rttPeriod, 0, 400 * time.Millisecond},                                // the first period forgotten
		{5 * rttPeriod, 0, 0}, // all forgotten
	}
	for _, s := range steps {
		now := t0.Add(s.at)
		if s.observe > 0 {
			r.observe(now, s.observe)
		}
		if got := r.estimate(now); got != s.want {
			t.Errorf("at %v after observing %v: estimate %v; want %v", s.at, s.observe, got, s.want)
		}
	}
}

// TestClientTimeoutNoDoomedSend reproduces issue 11's "under
// http.Client.Timeout a turn admitted a few ms before the deadline is sent
// and then times out (7 of 225)": 225 requests at once through a client
// with a 1 s Timeout, paced at 200 a second, to a server that answers in
// 50 ms. The turns from 950 ms on leave less than a round trip before the
// deadline: none of them may be sent, also those queued before any round
// trip had been measured. Every request sent is answered; every other
// fails with the deadline error, at once or at its turn, never by the
// client's timeout cutting a request in flight.
func TestClientTimeoutNoDoomedSend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const rtt = 50 * time.Millisecond
		var mu sync.Mutex
		var sent, answered, cut int
		var lastSent time.Duration
		start := time.Now()
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			sent++
			lastSent = max(lastSent, time.Since(start))
			mu.Unlock()
			select {
			case <-time.After(rtt):
				mu.Lock()
				answered++
				mu.Unlock()
				return respond(r, 200), nil
			case <-r.Context().Done():
				mu.Lock()
				cut++
				mu.Unlock()
				return nil, r.Context().Err()
			}
		})
		tr := &Transport{Base: base, Waiter: &Limiter{Limits: []Limit{{Rate: 200, Burst: 1}}}}
		client := &http.Client{Transport: tr, Timeout: time.Second}
		var wg sync.WaitGroup
		var refused, other atomic.Int64
		for range 225 {
			wg.Go(func() {
				resp, err := client.Get("http://api.example/x")
				switch {
				case err == nil:
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				case errors.Is(err, ErrWouldExceedDeadline) && errors.Is(err, context.DeadlineExceeded):
					refused.Add(1)
				default:
					other.Add(1)
					t.Logf("error: %v", err)
				}
			})
		}
		wg.Wait()
		if cut != 0 || other.Load() != 0 {
			t.Errorf("%d requests sent and cut by the timeout, %d other errors; want none", cut, other.Load())
		}
		// Turns every 5 ms from 0: those before 950 ms are sent.
		if want := 190; sent != want || answered != want || refused.Load() != 225-int64(want) {
			t.Errorf("sent %d, answered %d, refused %d; want %d, %d, %d", sent, answered, refused.Load(), want, want, 225-want)
		}
		if lastSent >= time.Second-rtt {
			t.Errorf("last request sent at %v; want before %v", lastSent, time.Second-rtt)
		}
	})
}
