package throttle

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/throttle-go/throttle/throttletest"
)

// tokens is OpenAI's tokens policy: a bucket of 6,000 refilling in a
// minute (100 a second), holding remaining.
// TestOtherUnitsLearnsCost checks the estimate of what a request costs in
// another unit: from the fall of the tokens remaining between two
// responses, plus the bucket's refill in between; then the tokens policy
// read in requests. Each step is one response, a second after the one
// before (100 tokens refilled), to a request of one unit.
// TestOtherUnitsSpent checks a refilling bucket that cannot pay for one
// more request: it is spent until its refill covers the difference.
// TestOtherUnitsWindow checks a window in another unit: the fall of its
// remaining within one window (the same end, whole-second resets) is the
// cost; a new window gives no sample.
// TestOtherUnitsBounded checks that memory is bounded however many keys
// come.
// TestLimiterAvailable checks the cap of a key's bucket by what a
// server's refilling bucket holds: Limiter{10/s, burst 10}, one unit
// gone and answered by a response saying 3 remain: 3 go at once, then one
// every 100 ms; a server fuller than the key's bucket gives nothing.
func TestLimiterAvailable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limit: 10, Burst: 10}
		w := l.For("k")
		ctx := context.Background()
		if err := w.WaitN(ctx, 1); err != nil { // in flight: its response not yet come
			t.Fatal(err)
		}
		a := w.(Adapter)
		a.Adapt(ctx, Feedback{Cost: 0, Available: 3, HasAvailable: true})
		start := time.Now()
		var got []time.Duration
		for range 5 {
			if err := w.WaitN(ctx, 1); err != nil {
				t.Fatal(err)
			}
			got = append(got, time.Since(start))
		}
		// The response of Cost 0 counts 1 (Cost's zero), so the unit in
		// flight is answered: 3 remain, as the server counts them.
		want := []time.Duration{0, 0, 0, 100 * time.Millisecond, 200 * time.Millisecond}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("turns after Available 3 = %v; want %v", got, want)
		}
		a.Adapt(ctx, Feedback{Available: 10, HasAvailable: true})
		start = time.Now()
		if err := w.WaitN(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 100*time.Millisecond {
			t.Errorf("after Available 10 the next went in %v; want 100ms: a fuller server gives no units", d)
		}

		// Units in flight the server has not counted are taken off: two
		// gone, one answered (the response saying 3 remain), one in
		// flight: 2 at once.
		w = l.For("k2")
		if err := w.WaitN(ctx, 2); err != nil {
			t.Fatal(err)
		}
		w.(Adapter).Adapt(ctx, Feedback{Cost: 1, Available: 3, HasAvailable: true})
		start = time.Now()
		got = got[:0]
		for range 3 {
			if err := w.WaitN(ctx, 1); err != nil {
				t.Fatal(err)
			}
			got = append(got, time.Since(start))
		}
		if want := []time.Duration{0, 0, 100 * time.Millisecond}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("turns after Available 3 with one in flight = %v; want %v", got, want)
		}
	})
}

// TestTransportOtherUnits is the user who tells nothing: a fake of
// OpenAI's API allowing 60 requests and 6,000 tokens a minute, requests
// of 202 tokens (the tokens bind: 29.7 a minute), 8 workers for three
// minutes through a zero-config Transport. Before the cost was learned,
// each pause's end let the queued requests into a spent tokens bucket:
// 135 pauses, about one 429 per success and 8% of the requests given up.
func TestTransportOtherUnits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := throttletest.NewOpenAI(60, 6000)
		s.PromptTokens = 2
		var (
			mu      sync.Mutex
			giveUps int
		)
		tr := &Transport{Base: &throttletest.Direct{Handler: s, Latency: 100 * time.Millisecond, Jitter: 10 * time.Millisecond, Seed: 1},
			OnEvent: func(e Event) {
				if e.Kind == EventGiveUp {
					mu.Lock()
					giveUps++
					mu.Unlock()
				}
			}}
		start := time.Now()
		closedLoop(t, &http.Client{Transport: tr}, 8, 3*time.Minute, `{"max_tokens":200}`)
		wall := time.Since(start)
		capacity := (6000 + 6000*wall.Minutes()) / 202 // full, then 100 tokens a second
		st := s.Stats()
		if got := float64(st.Admitted) / capacity; got < 0.95 {
			t.Errorf("%d admitted in %v: %.2f of the tokens' capacity; want ≥ 0.95", st.Admitted, wall, got)
		}
		if float64(st.Rejected) > 0.01*float64(st.Admitted) {
			t.Errorf("%d refused for %d admitted; want ≤ 1%%", st.Rejected, st.Admitted)
		}
		if giveUps > 0 {
			t.Errorf("%d given up; want none", giveUps)
		}
		t.Logf("admitted %d (%.3f of capacity), refused %d, in %v", st.Admitted, float64(st.Admitted)/capacity, st.Rejected, wall)
	})
}
