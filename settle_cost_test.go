package throttle_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/throttle-go/throttle"
)

// TestSettleCost: a cost settled in the tokens unit moves the tokens
// limits, exactly: a bucket's queued turn earlier by the units given back
// (never past a full bucket), later by a charge; a window's count down by
// a give-back (in the window the units went) and up by a charge.
func TestSettleCost(t *testing.T) {
	tokens := func(n int) []throttle.UnitCost { return []throttle.UnitCost{{Unit: "tokens", N: n}} }
	for _, tt := range []struct {
		name   string
		limit  throttle.UnitLimit
		used   int           // the first wait's 1,000 tokens, settled as used
		second int           // the second wait's tokens
		want   time.Duration // when the second wait goes
	}{
		// 1,000 tokens a second, 1,000 at once: 1,000 spent, 620 used →
		// 380 back: 800 tokens go after 420 ms, not 800 ms.
		{"bucket give-back", throttle.UnitLimit{Unit: "tokens", Rate: throttle.Rate{Limit: 1000, Burst: 1000}}, 620, 800, 420 * time.Millisecond},
		// 1,500 used: a debt of 500, 800 tokens go after 1.3 s.
		{"bucket charge", throttle.UnitLimit{Unit: "tokens", Rate: throttle.Rate{Limit: 1000, Burst: 1000}}, 1500, 800, 1300 * time.Millisecond},
		// All given back: the bucket is full again, and no more than full
		// (1,001 would exceed its burst: 1,000 go now, the 1,001st later).
		{"bucket give-back all", throttle.UnitLimit{Unit: "tokens", Rate: throttle.Rate{Limit: 1000, Burst: 1000}}, 0, 1000, 0},
		// 1,000 per 2 s window: 380 back leaves room for 380 more now.
		{"window give-back", throttle.UnitLimit{Unit: "tokens", Window: throttle.Window{Count: 1000, Per: 2 * time.Second}}, 620, 380, 0},
		{"window give-back short", throttle.UnitLimit{Unit: "tokens", Window: throttle.Window{Count: 1000, Per: 2 * time.Second}}, 620, 381, 2 * time.Second},
		// 1,500 used in a window of 2,000: 500 left, not 1,000.
		{"window charge", throttle.UnitLimit{Unit: "tokens", Window: throttle.Window{Count: 2000, Per: 2 * time.Second}}, 1500, 501, 2 * time.Second},
		{"window charge fits", throttle.UnitLimit{Unit: "tokens", Window: throttle.Window{Count: 2000, Per: 2 * time.Second}}, 1500, 500, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// Start on a window's boundary (the bubble's clock is
				// 2000-01-01 UTC, a multiple of 2 s since the epoch).
				lim := &throttle.Limiter{Limits: []throttle.UnitLimit{tt.limit}}
				ctx := context.Background()
				spent := throttle.Cost{Units: tokens(1000)}
				if err := lim.WaitCost(ctx, spent); err != nil {
					t.Fatal(err)
				}
				if err := lim.SettleCost(ctx, spent, throttle.Cost{Units: tokens(tt.used)}); err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				if err := lim.WaitCost(ctx, throttle.Cost{Units: tokens(tt.second)}); err != nil {
					t.Fatal(err)
				}
				if got := time.Since(start); got != tt.want {
					t.Errorf("second wait of %d tokens went after %v; want %v", tt.second, got, tt.want)
				}
			})
		})
	}
}

// TestSettleCostQueued: a give-back moves a queued wait's turn earlier at
// once, and a charge later: its sleeper learns it.
func TestSettleCostQueued(t *testing.T) {
	for _, tt := range []struct {
		name string
		used int
		want time.Duration
	}{{"give-back", 600, 600 * time.Millisecond}, {"charge", 1200, 1200 * time.Millisecond}} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lim := &throttle.Limiter{Limits: []throttle.UnitLimit{{Unit: "tokens", Rate: throttle.Rate{Limit: 1000, Burst: 1000}}}}
				ctx := context.Background()
				spent := throttle.Cost{Units: []throttle.UnitCost{{Unit: "tokens", N: 1000}}}
				if err := lim.WaitCost(ctx, spent); err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				done := make(chan time.Duration)
				go func() {
					lim.WaitCost(ctx, spent) // queued: due at 1 s
					done <- time.Since(start)
				}()
				synctest.Wait()
				if err := lim.SettleCost(ctx, spent, throttle.Cost{Units: []throttle.UnitCost{{Unit: "tokens", N: tt.used}}}); err != nil {
					t.Fatal(err)
				}
				if got := <-done; got != tt.want {
					t.Errorf("queued wait went after %v; want %v", got, tt.want)
				}
			})
		})
	}
}

// TestSettleCostErrors: a unit the key has no limit in, a negative cost,
// or a spent cost no wait could spend fails and changes nothing.
func TestSettleCostErrors(t *testing.T) {
	lim := &throttle.Limiter{Limits: []throttle.UnitLimit{{Unit: "tokens", Rate: throttle.Rate{Limit: 1000, Burst: 1000}}}}
	ctx := context.Background()
	k := lim.Key("a")
	tok := func(n int) throttle.Cost { return throttle.Cost{Units: []throttle.UnitCost{{Unit: "tokens", N: n}}} }
	for _, tt := range []struct {
		name          string
		spent, actual throttle.Cost
		want          error
	}{
		{"unknown unit", tok(10), throttle.Cost{Units: []throttle.UnitCost{{Unit: "bytes", N: 1}}}, throttle.ErrInvalidLimit},
		{"negative", tok(10), tok(-1), throttle.ErrInvalidLimit},
		{"past burst", tok(1001), tok(10), throttle.ErrCostExceedsBurst},
	} {
		if err := k.SettleCost(ctx, tt.spent, tt.actual); !errors.Is(err, tt.want) {
			t.Errorf("%s: SettleCost = %v; want %v", tt.name, err, tt.want)
		}
	}
	if ok, _, _ := lim.For("a").(throttle.CostTrier).TryCost(ctx, tok(1000)); !ok {
		t.Errorf("after failed settles, TryCost(1000 tokens) on a full bucket = false")
	}
}
