package distributed

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/throttle-go/throttle"
)

// TestRedisSettleCost: op msettle, a settled cost on a further limit.
// Tokens 10/s, burst 5: A's wait of 5 tokens empties the bucket and B's
// of 5, 20ms later, has its turn 500ms after A's. Settling A's tokens as
// 2 moves B's turn to 200ms after A's (B sleeps: the move is pushed), as
// 8 to 800ms, as 10 (a debt of the whole burst) to 1 s, and as 15 to 1 s
// too (a charge is at most the burst: actual counts as at most spent +
// burst); turns read on Redis's clock, exact to the script's µs
// rounding.
func TestRedisSettleCost(t *testing.T) {
	t.Parallel()
	_, c := startRedis(t)
	tok := func(n int) throttle.Cost { return throttle.Cost{Units: []throttle.UnitCost{{Unit: "tokens", N: n}}} }
	for _, tt := range []struct {
		actual int
		want   int64 // B's turn after A's, µs
	}{{5, 500e3}, {2, 200e3}, {8, 800e3}, {10, 1000e3}, {15, 1000e3}} {
		t.Run(fmt.Sprint(tt.actual), func(t *testing.T) {
			q := New(c, fmt.Sprint("settlecost-", tt.actual), 1000, 1000)
			q.Limits = []throttle.UnitLimit{{Unit: "tokens", Rate: throttle.Rate{Limit: 10, Burst: 5}}}
			q.Timeout = time.Second
			defer q.Close()
			w := q.For("k").(*keyWaiter)
			ctx := context.Background()
			x, err := q.xargs(tok(5).Units)
			if err != nil {
				t.Fatal(err)
			}
			a, err := w.waitDirectX(ctx, 1, queueFirst, x, nil)
			if err != nil {
				t.Fatal(err)
			}
			var bt int64
			done := make(chan error)
			go func() {
				var err error
				bt, err = w.waitDirectX(ctx, 1, queueFirst, x, nil)
				done <- err
			}()
			awaitSleeping(t, q, 1)
			if err := w.SettleCost(ctx, tok(5), tok(tt.actual)); err != nil {
				t.Fatalf("SettleCost(5, %d tokens): %v", tt.actual, err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			t.Logf("SettleCost(5, %d tokens): B went %.3fms after A", tt.actual, float64(bt-a)/1e3)
			if got := bt - a; got < tt.want-2 || got > tt.want+2 {
				t.Errorf("after SettleCost(5, %d tokens), B went %dµs after A; want %d", tt.actual, got, tt.want)
			}
		})
	}
}

// TestRedisSettleCostWindow: a window of 10 tokens per minute: 8 spent,
// settled as 3, leaves 7 now (TryCost of 7 goes, of 1 more does not);
// settled as 12, a charge past the window, leaves nothing.
func TestRedisSettleCostWindow(t *testing.T) {
	_, c := startRedis(t)
	tok := func(n int) throttle.Cost { return throttle.Cost{Units: []throttle.UnitCost{{Unit: "tokens", N: n}}} }
	for _, tt := range []struct {
		actual, left int
	}{{3, 7}, {12, 0}, {8, 2}} {
		t.Run(fmt.Sprint(tt.actual), func(t *testing.T) {
			q := New(c, fmt.Sprint("settlecostwin-", tt.actual), 1000, 1000)
			q.Limits = []throttle.UnitLimit{{Unit: "tokens", Window: throttle.Window{Count: 10, Per: time.Minute}}}
			q.Timeout = time.Second
			defer q.Close()
			// Not within a second of a minute's end: the window must not turn.
			for time.Now().Second() >= 58 {
				time.Sleep(100 * time.Millisecond)
			}
			k := q.For("k").(throttle.CostTrier)
			ctx := context.Background()
			if ok, _, err := k.TryCost(ctx, tok(8)); !ok || err != nil {
				t.Fatalf("TryCost(8 tokens) = %v, %v", ok, err)
			}
			if err := q.For("k").(throttle.CostSettler).SettleCost(ctx, tok(8), tok(tt.actual)); err != nil {
				t.Fatal(err)
			}
			if tt.left > 0 {
				if ok, _, err := k.TryCost(ctx, tok(tt.left)); !ok || err != nil {
					t.Errorf("settled as %d: TryCost(%d tokens) = %v, %v; want true", tt.actual, tt.left, ok, err)
				}
			}
			if ok, _, err := k.TryCost(ctx, tok(1)); ok || err != nil {
				t.Errorf("settled as %d, %d taken: TryCost(1 token) = %v, %v; want false", tt.actual, tt.left, ok, err)
			}
		})
	}
	// A unit actual does not name stays as spent: requests 2 per minute,
	// one spent and settled naming the tokens alone: one request is left.
	{
		q := New(c, "settlecost-unnamed", 1000, 1000)
		q.Limits = []throttle.UnitLimit{
			{Unit: "requests", Window: throttle.Window{Count: 2, Per: time.Minute}},
			{Unit: "tokens", Window: throttle.Window{Count: 10, Per: time.Minute}},
		}
		defer q.Close()
		for time.Now().Second() >= 58 {
			time.Sleep(100 * time.Millisecond)
		}
		k := q.For("k")
		ctx := context.Background()
		req := func(toks int) throttle.Cost {
			return throttle.Cost{Units: []throttle.UnitCost{{Unit: "requests", N: 1}, {Unit: "tokens", N: toks}}}
		}
		if ok, _, err := k.(throttle.CostTrier).TryCost(ctx, req(8)); !ok || err != nil {
			t.Fatalf("TryCost(a request, 8 tokens) = %v, %v", ok, err)
		}
		if err := k.(throttle.CostSettler).SettleCost(ctx, req(8), tok(2)); err != nil {
			t.Fatal(err)
		}
		if ok, _, err := k.(throttle.CostTrier).TryCost(ctx, req(8)); !ok || err != nil {
			t.Errorf("after 6 tokens given back: TryCost(a request, 8 tokens) = %v, %v; want true", ok, err)
		}
		if ok, _, err := k.(throttle.CostTrier).TryCost(ctx, req(0)); ok || err != nil {
			t.Errorf("2 requests spent, the first settled naming tokens alone: TryCost(a request) = %v, %v; want false", ok, err)
		}
	}
	q := New(c, "settlecost-errors", 1000, 1000)
	q.Limits = []throttle.UnitLimit{{Unit: "tokens", Window: throttle.Window{Count: 10, Per: time.Minute}}}
	defer q.Close()
	for _, tt := range []struct {
		spent, actual throttle.Cost
		want          error
	}{
		{tok(1), throttle.Cost{Units: []throttle.UnitCost{{Unit: "bytes", N: 1}}}, throttle.ErrInvalidLimit},
		{tok(1), tok(-1), throttle.ErrInvalidLimit},
		{tok(11), tok(1), throttle.ErrCostExceedsBurst},
	} {
		if err := q.SettleCost(context.Background(), tt.spent, tt.actual); !errors.Is(err, tt.want) {
			t.Errorf("SettleCost(%v, %v) = %v; want %v", tt.spent, tt.actual, err, tt.want)
		}
	}
}

// TestRedisSettleCostChargeBounded: each charge of a settled cost is at
// most its limit's burst or count, the rest dropped and reported per
// limit. Tokens 10/s burst 5 and 7 per minute (from first use): a wait
// of 1 token settled as 2^31 leaves each limit one token in debt
// (5 − 1 − 5 and 7 − 1 − 7), not 2^31; the first limit's cost is
// settled as it was spent, and drops nothing.
func TestRedisSettleCostChargeBounded(t *testing.T) {
	_, c := startRedis(t)
	tok := func(n int) throttle.Cost { return throttle.Cost{Units: []throttle.UnitCost{{Unit: "tokens", N: n}}} }
	q := New(c, "settlecost-charge", 1000, 1000)
	q.Limits = []throttle.UnitLimit{{Unit: "tokens", Rate: throttle.Rate{Limit: 10, Burst: 5},
		Window: throttle.Window{Count: 7, Per: time.Minute, FirstUse: true}}}
	q.Timeout = time.Second
	defer q.Close()
	ctx := context.Background()
	w := q.For("k").(*keyWaiter)
	if err := w.WaitCost(ctx, tok(1)); err != nil {
		t.Fatal(err)
	}
	dropped, err := w.settleCost(ctx, tok(1), tok(1<<31))
	if want := []int64{0, 1<<31 - 1 - 5, 1<<31 - 1 - 7}; err != nil || !slices.Equal(dropped, want) {
		t.Fatalf("settleCost(1 token, 2^31 tokens) = %v, %v; want %v dropped", dropped, err, want)
	}
	states, err := q.LimitStates(ctx, "k")
	if err != nil || len(states) != 2 {
		t.Fatalf("LimitStates = %v, %v", states, err)
	}
	if r := states[0].Remaining; r < -1 || r > -0.9 {
		t.Errorf("the bucket's remaining = %v; want about -1 (a debt of one token)", r)
	}
	if r := states[1].Remaining; r != -1 {
		t.Errorf("the window's remaining = %v; want -1", r)
	}
}
