package throttle

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/throttle-go/throttle/internal/schedule"
	"github.com/throttle-go/throttle/throttletest"
)

// TestRefusedTrims checks a refusal that said when to come back, under a
// known limit: the pause holds the key, and then it goes a step slower
// (schedule.TrimStep) than its limit, without a shift; a bare response after it
// changes nothing, and no refusal trims past schedule.TrimMax.
func TestRefusedTrims(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limits: []Limit{{Rate: 10, Burst: 1}}}
		w := l.For("k")
		ctx := context.Background()
		if err := w.WaitN(ctx, 1); err != nil {
			t.Fatal(err)
		}
		w.Observe(ctx, Feedback{Verdict: Refused, Spent: 1, Pause: time.Second})
		start := time.Now()
		var got []time.Duration
		for range 3 {
			if err := w.WaitN(ctx, 1); err != nil {
				t.Fatal(err)
			}
			got = append(got, time.Since(start))
		}
		// 10/s trimmed by 1%: 9.9/s, one every 101.0101… ms after the
		// pause, which the first takes (a full bucket at its end).
		second, trimmed := float64(time.Second), 10*(1-schedule.TrimStep)
		step := time.Duration(second / trimmed)
		want := []time.Duration{time.Second, time.Second + step, time.Second + 2*step}
		for i := range want {
			if d := got[i] - want[i]; d < -time.Microsecond || d > time.Microsecond {
				t.Fatalf("turns after a refusal = %v; want %v (within a µs: the float pace)", got, want)
			}
		}
		// The same pause without Refused (a spent window's reset) trims
		// nothing more.
		w2 := l.For("k2")
		_ = w2.WaitN(ctx, 1)
		w2.Observe(ctx, Feedback{Spent: 1, Pause: time.Second})
		start = time.Now()
		_ = w2.WaitN(ctx, 1)
		_ = w2.WaitN(ctx, 1)
		if d := time.Since(start); d != time.Second+100*time.Millisecond {
			t.Errorf("after a pause that was no refusal the second unit went at %v; want 1.1s", d)
		}
		// Refusals trim to schedule.TrimMax and no further.
		w3 := l.For("k3")
		for range 20 {
			w3.Observe(ctx, Feedback{Verdict: Refused, Spent: 1, Pause: time.Millisecond})
		}
		st := keyState(l, "k3")
		if want := 10 * (1 - schedule.TrimMax); fmt.Sprintf("%.6f", float64(st.Rate)) != fmt.Sprintf("%.6f", want) {
			t.Errorf("after 20 refusals the pace is %v/s; want %v/s (schedule.TrimMax)", st.Rate, want)
		}
	})
}

// TestTransportRefusedJitter is a server bucket of 100/s, burst 10, whose
// 429s carry Retry-After (whole seconds, rounded up: "1" for a token a
// millisecond away), up to 1 ms of dispatch jitter, and a Transport told
// the exact limit, 16 workers, 2,000 requests. Each 429 pauses the key a
// whole second, after which both buckets are full, the first burst
// empties both, and the next early arrival is refused again: 64 such
// pauses took this run to 78 s (0.26 of the capacity; 0.39 in the
// throttletest table's runs). A refusal now
// trims the pace a little, and the server's bucket keeps the slack it
// gains.
func TestTransportRefusedJitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := throttletest.NewTokenBucket(100, 10)
		s.RetryAfter = true
		tr := &Transport{Waiter: &Limiter{Limits: []Limit{{Rate: 100, Burst: 10}}},
			Base: &throttletest.Direct{Handler: s, Latency: time.Millisecond, Jitter: time.Millisecond, Seed: 1}}
		start := time.Now()
		closedLoopN(t, &http.Client{Transport: tr}, 16, 2000)
		wall := time.Since(start)
		st := s.Stats()
		capacity := 10 + 100*wall.Seconds()
		if st.Admitted != 2000 {
			t.Errorf("%d admitted; want 2000", st.Admitted)
		}
		if st.Rejected > 4 {
			t.Errorf("%d refused; want ≤ 4 (each costs a second's pause; 64 before)", st.Rejected)
		}
		if got := float64(st.Admitted) / capacity; got < 0.9 {
			t.Errorf("%d admitted in %v: %.2f of capacity; want ≥ 0.9", st.Admitted, wall, got)
		}
		t.Logf("admitted %d, refused %d, in %v: %.3f of capacity", st.Admitted, st.Rejected, wall, float64(st.Admitted)/capacity)
	})
}
