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
	tok := func(n int) throttle.Cost { return throttle.Cost{N: 1, Units: map[string]int{"tokens": n}} }
	for _, tt := range []struct {
		actual int
		want   int64 // B's turn after A's, µs
	}{{5, 500e3}, {2, 200e3}, {8, 800e3}, {10, 1000e3}, {15, 1000e3}} {
		t.Run(fmt.Sprint(tt.actual), func(t *testing.T) {
			q := New(c, fmt.Sprint("settlecost-", tt.actual), throttle.Limit{Rate: 1000, Burst: 1000}, throttle.Limit{Unit: "tokens", Rate: 10, Burst: 5})
			q.Timeout = time.Second
			defer q.Close()
			w := q.For("k").(*keyWaiter)
			ctx := context.Background()
			cost, err := q.costOf(tok(5))
			if err != nil {
				t.Fatal(err)
			}
			x := q.xargs(cost)
			a, err := w.waitDirectX(ctx, tok(5), x)
			if err != nil {
				t.Fatal(err)
			}
			var bt int64
			done := make(chan error)
			go func() {
				var err error
				bt, err = w.waitDirectX(ctx, tok(5), x)
				done <- err
			}()
			awaitSleeping(t, q, 1)
			if err := w.Settle(ctx, tok(5), tok(tt.actual)); err != nil {
				t.Fatalf("Settle(5, %d tokens): %v", tt.actual, err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			t.Logf("Settle(5, %d tokens): B went %.3fms after A", tt.actual, float64(bt-a)/1e3)
			if got := bt - a; got < tt.want-2 || got > tt.want+2 {
				t.Errorf("after Settle(5, %d tokens), B went %dµs after A; want %d", tt.actual, got, tt.want)
			}
		})
	}
}

// TestRedisSettleCostWindow: a window of 10 tokens per minute: 8 spent,
// settled as 3, leaves 7 now (a try of 7 goes, of 1 more does not);
// settled as 12, a charge past the window, leaves nothing.
func TestRedisSettleCostWindow(t *testing.T) {
	_, c := startRedis(t)
	tok := func(n int) throttle.Cost { return throttle.Cost{N: 1, Units: map[string]int{"tokens": n}} }
	for _, tt := range []struct {
		actual, left int
	}{{3, 7}, {12, 0}, {8, 2}} {
		t.Run(fmt.Sprint(tt.actual), func(t *testing.T) {
			q := New(c, fmt.Sprint("settlecostwin-", tt.actual), throttle.Limit{Rate: 1000, Burst: 1000}, throttle.Limit{Unit: "tokens", Count: 10, Per: time.Minute})
			q.Timeout = time.Second
			defer q.Close()
			// Not within a second of a minute's end: the window must not turn.
			for time.Now().Second() >= 58 {
				time.Sleep(100 * time.Millisecond)
			}
			k := q.For("k")
			ctx := context.Background()
			if ok, _, err := k.Try(ctx, tok(8)); !ok || err != nil {
				t.Fatalf("Try(8 tokens) = %v, %v", ok, err)
			}
			if err := q.For("k").Settle(ctx, tok(8), tok(tt.actual)); err != nil {
				t.Fatal(err)
			}
			if tt.left > 0 {
				if ok, _, err := k.Try(ctx, tok(tt.left)); !ok || err != nil {
					t.Errorf("settled as %d: Try(%d tokens) = %v, %v; want true", tt.actual, tt.left, ok, err)
				}
			}
			if ok, _, err := k.Try(ctx, tok(1)); ok || err != nil {
				t.Errorf("settled as %d, %d taken: Try(1 token) = %v, %v; want false", tt.actual, tt.left, ok, err)
			}
		})
	}
	// A unit actual does not name stays as spent: requests 2 per minute,
	// one spent and settled naming the tokens alone: one request is left.
	{
		q := New(c, "settlecost-unnamed", throttle.Limit{Rate: 1000, Burst: 1000}, throttle.Limit{Unit: "requests", Count: 2, Per: time.Minute}, throttle.Limit{Unit: "tokens", Count: 10, Per: time.Minute})
		defer q.Close()
		for time.Now().Second() >= 58 {
			time.Sleep(100 * time.Millisecond)
		}
		k := q.For("k")
		ctx := context.Background()
		req := func(toks int) throttle.Cost {
			return throttle.Cost{N: 1, Units: map[string]int{"requests": 1, "tokens": toks}}
		}
		if ok, _, err := k.Try(ctx, req(8)); !ok || err != nil {
			t.Fatalf("Try(a request, 8 tokens) = %v, %v", ok, err)
		}
		if err := k.Settle(ctx, req(8), tok(2)); err != nil {
			t.Fatal(err)
		}
		if ok, _, err := k.Try(ctx, req(8)); !ok || err != nil {
			t.Errorf("after 6 tokens given back: Try(a request, 8 tokens) = %v, %v; want true", ok, err)
		}
		if ok, _, err := k.Try(ctx, req(0)); ok || err != nil {
			t.Errorf("2 requests spent, the first settled naming tokens alone: Try(a request) = %v, %v; want false", ok, err)
		}
	}
	q := New(c, "settlecost-errors", throttle.Limit{Rate: 1000, Burst: 1000}, throttle.Limit{Unit: "tokens", Count: 10, Per: time.Minute})
	defer q.Close()
	for _, tt := range []struct {
		spent, actual throttle.Cost
		want          error
	}{
		{tok(1), throttle.Cost{N: 1, Units: map[string]int{"bytes": 1}}, throttle.ErrInvalidLimit},
		{tok(1), tok(-1), throttle.ErrInvalidLimit},
		{tok(11), tok(1), throttle.ErrCostExceedsBurst},
	} {
		if err := q.For("").Settle(context.Background(), tt.spent, tt.actual); !errors.Is(err, tt.want) {
			t.Errorf("Settle(%v, %v) = %v; want %v", tt.spent, tt.actual, err, tt.want)
		}
	}
}

// TestRedisSettleCostChargeBounded: each charge of a settled cost is at
// most its limit's burst or count, the rest dropped and reported per
// limit as an EventClamp. Tokens 10/s burst 5 and 7 per minute (from
// first use): a wait of 1 token settled as 2^31 leaves each limit one
// token in debt (5 − 1 − 5 and 7 − 1 − 7), not 2^31; the first limit's
// cost is settled as it was spent, and drops nothing.
func TestRedisSettleCostChargeBounded(t *testing.T) {
	_, c := startRedis(t)
	tok := func(n int) throttle.Cost { return throttle.Cost{N: 1, Units: map[string]int{"tokens": n}} }
	q := New(c, "settlecost-charge", throttle.Limit{Rate: 1000, Burst: 1000}, throttle.Limit{Unit: "tokens", Rate: 10, Burst: 5, Count: 7, Per: time.Minute, Kind: throttle.FromFirstUse})
	q.Timeout = time.Second
	var clamps []throttle.Event // OnEvent is called synchronously by Settle
	q.OnEvent = func(e throttle.Event) { clamps = append(clamps, e) }
	defer q.Close()
	ctx := context.Background()
	w := q.For("k")
	if err := w.Wait(ctx, tok(1)); err != nil {
		t.Fatal(err)
	}
	if err := w.Settle(ctx, tok(1), tok(1<<31)); err != nil {
		t.Fatalf("Settle(1 token, 2^31 tokens) = %v", err)
	}
	want := []throttle.Event{
		{Kind: throttle.EventClamp, Key: "k", Units: 1<<31 - 1 - 5, Unit: "tokens"},
		{Kind: throttle.EventClamp, Key: "k", Units: 1<<31 - 1 - 7, Unit: "tokens"},
	}
	if !slices.Equal(clamps, want) {
		t.Errorf("Settle(1 token, 2^31 tokens) told %+v; want %+v", clamps, want)
	}
	st, err := w.State(ctx)
	states := st.Limits
	if err != nil || len(states) != 2 {
		t.Fatalf("State().Limits = %v, %v", states, err)
	}
	if r := states[0].Remaining; r < -1 || r > -0.9 {
		t.Errorf("the bucket's remaining = %v; want about -1 (a debt of one token)", r)
	}
	if r := states[1].Remaining; r != -1 {
		t.Errorf("the window's remaining = %v; want -1", r)
	}
}
