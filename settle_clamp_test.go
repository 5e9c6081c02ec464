package throttle

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// TestSettleClampsCharge: a settle charges at most what a limit holds at
// once beyond what the wait spent: one usage of 2^31 units on a bucket of
// 10/s, 5 at once, after a wait of 1, owes 5 units (half a second past
// the bucket being empty), not 6.8 years, and reports the rest dropped as
// an EventClamp, per unit.
func TestSettleClampsCharge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var events []Event
		l := &Limiter{
			Limits:  []Limit{{Rate: 10, Burst: 5}, {Unit: "tokens", Count: 1000, Per: time.Minute}},
			OnEvent: func(e Event) { events = append(events, e) },
		}
		q := l.For("k")
		ctx := context.Background()
		spent := Cost{N: 1, Units: map[string]int{"tokens": 10}}
		if err := q.Wait(ctx, spent); err != nil {
			t.Fatal(err)
		}
		actual := Cost{N: 1 << 31, Units: map[string]int{"tokens": 1 << 40}}
		if err := q.Settle(ctx, spent, actual); err != nil {
			t.Fatal(err)
		}
		want := []Event{
			{Kind: EventClamp, Key: "k", Units: 1<<31 - 1 - 5},
			{Kind: EventClamp, Key: "k", Units: 1<<40 - 10 - 1000, Unit: "tokens"},
		}
		if len(events) != len(want) {
			t.Fatalf("events %+v; want %+v", events, want)
		}
		for i := range want {
			if events[i] != want[i] {
				t.Errorf("event %d: %+v; want %+v", i, events[i], want[i])
			}
		}
		// The bucket: 4 left after the wait, 5 more charged: a debt of
		// one unit, paid 100 ms from now; the next wait goes 100 ms after
		// that.
		start := time.Now()
		dctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if err := q.WaitN(dctx, 1); err != nil {
			t.Fatalf("a wait after the clamped settle: %v", err)
		}
		if d := time.Since(start); d != 200*time.Millisecond {
			t.Errorf("the next wait went after %v; want 200ms", d)
		}
	})
}
