package throttle_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/throttle-go/throttle"
)

// keyState returns key's state now (a Limiter key's State never fails).
func keyState(l *throttle.Limiter, key string) throttle.State {
	st, _ := l.For(key).State(context.Background())
	return st
}

// waitAt starts a wait of n units and returns a channel that receives
// how long after start it returned, and its error.
func waitAt(ctx context.Context, w throttle.Waiter, n int, start time.Time) <-chan settled {
	ch := make(chan settled, 1)
	go func() {
		err := w.WaitN(ctx, n)
		ch <- settled{time.Since(start), err}
	}()
	return ch
}

type settled struct {
	at  time.Duration
	err error
}

// TestSettleMovesTurns: at 10/s, burst 5, a wait of 5 empties the bucket
// and the next wait of 5 sleeps until 500ms. Settling the first as 2
// (3 units back) at 50ms wakes it to go at 200ms; as 8 (a charge of 3)
// at 100ms, at 800ms; as 15, a charge of 10 clamped to the burst's 5
// (EventClamp), at 1 s.
func TestSettleMovesTurns(t *testing.T) {
	for _, tt := range []struct {
		name   string
		at     time.Duration // when the first wait is settled
		actual int
		want   time.Duration // when the second wait goes
	}{
		{"unchanged", 50 * time.Millisecond, 5, 500 * time.Millisecond},
		{"give back 3", 50 * time.Millisecond, 2, 200 * time.Millisecond},
		{"give back all", 50 * time.Millisecond, 0, 50 * time.Millisecond},
		{"charge 3", 100 * time.Millisecond, 8, 800 * time.Millisecond},
		{"charge past the burst", 100 * time.Millisecond, 15, time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := (&throttle.Limiter{Limits: []throttle.Limit{{Rate: 10, Burst: 5}}}).For("k")
				start := time.Now()
				if err := w.WaitN(t.Context(), 5); err != nil {
					t.Fatal(err)
				}
				next := waitAt(t.Context(), w, 5, start)
				time.Sleep(tt.at)
				if err := w.Settle(t.Context(), throttle.Cost{N: 5}, throttle.Cost{N: tt.actual}); err != nil {
					t.Fatalf("Settle(5, %d): %v", tt.actual, err)
				}
				if got := <-next; got.err != nil || got.at != tt.want {
					t.Errorf("after Settle(5, %d) at %v: the next wait of 5 went at %v, %v; want %v, nil", tt.actual, tt.at, got.at, got.err, tt.want)
				}
			})
		})
	}
}

// TestSettleNextWait: a settle with nothing queued moves the next wait's
// turn: 3 units back let a wait of 4 go 300ms earlier; a charge of 3
// delays it 300ms.
func TestSettleNextWait(t *testing.T) {
	for _, tt := range []struct {
		actual int
		want   time.Duration
	}{{5, 400 * time.Millisecond}, {2, 100 * time.Millisecond}, {8, 700 * time.Millisecond}} {
		synctest.Test(t, func(t *testing.T) {
			w := (&throttle.Limiter{Limits: []throttle.Limit{{Rate: 10, Burst: 5}}}).For("k")
			start := time.Now()
			if err := w.WaitN(t.Context(), 5); err != nil {
				t.Fatal(err)
			}
			if err := w.Settle(t.Context(), throttle.Cost{N: 5}, throttle.Cost{N: tt.actual}); err != nil {
				t.Fatal(err)
			}
			if err := w.WaitN(t.Context(), 4); err != nil || time.Since(start) != tt.want {
				t.Errorf("Settle(5, %d), then a wait of 4: %v after %v; want nil after %v", tt.actual, err, time.Since(start), tt.want)
			}
		})
	}
}

// TestSettleAfterIdle: a charge to a bucket that has refilled since the
// wait is taken from the full bucket (found by the property suite: it was
// taken from the refill that GCRA's floor discards). At 10/s burst 5: a
// wait of 1, a second idle, the wait settled as 3: the bucket holds 3, so
// a wait of 5 goes 200ms later.
func TestSettleAfterIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := (&throttle.Limiter{Limits: []throttle.Limit{{Rate: 10, Burst: 5}}}).For("k")
		if err := w.WaitN(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if err := w.Settle(t.Context(), throttle.Cost{N: 1}, throttle.Cost{N: 3}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := w.WaitN(t.Context(), 5); err != nil || time.Since(start) != 200*time.Millisecond {
			t.Errorf("a wait of 5 after a charge of 2 to a full bucket: %v after %v; want nil after 200ms", err, time.Since(start))
		}
	})
}

// TestSettleBounded: units given back never make the bucket hold more
// than its burst, and costs no wait could have spent are refused, with
// nothing changed.
func TestSettleBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &throttle.Limiter{Limits: []throttle.Limit{{Rate: 10, Burst: 5}}}
		w := l.For("k")
		if err := w.WaitN(t.Context(), 5); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second) // the bucket is full again
		if err := w.Settle(t.Context(), throttle.Cost{N: 5}, throttle.Cost{N: 0}); err != nil {
			t.Fatal(err)
		}
		if st := keyState(l, "k"); st.Tokens != 5 {
			t.Errorf("5 units given back to a full bucket of 5: it holds %v; want 5", st.Tokens)
		}
		start := time.Now()
		if err := w.WaitN(t.Context(), 5); err != nil || time.Since(start) != 0 {
			t.Fatalf("a wait of 5: %v after %v; want at once", err, time.Since(start))
		}
		if err := w.WaitN(t.Context(), 1); err != nil || time.Since(start) != 100*time.Millisecond {
			t.Errorf("the next unit: %v after %v; want 100ms: a give-back past the burst was kept", err, time.Since(start))
		}
		for _, tt := range []struct {
			spent, actual int
			want          error
		}{{2, -1, throttle.ErrInvalidLimit}, {-1, 0, throttle.ErrInvalidLimit}, {6, 0, throttle.ErrCostExceedsBurst}} {
			if err := w.Settle(t.Context(), throttle.Cost{N: tt.spent}, throttle.Cost{N: tt.actual}); !errors.Is(err, tt.want) {
				t.Errorf("Settle(%d, %d) = %v; want %v", tt.spent, tt.actual, err, tt.want)
			}
		}
		if st := keyState(l, "k"); st.Next != 100*time.Millisecond {
			t.Errorf("after refused settles, the next unit is in %v; want 100ms (nothing changed)", st.Next)
		}
	})
}

// TestSettleBoundedQueued: a give-back with waits queued makes the bucket
// hold its burst at most: at 10/s, burst 5, waits of 5 at 0, 500ms and
// 1 s; the first settled as 0 at 400ms, when the bucket would hold 9 with
// the 5 given back, lets the second go at once and the third 500ms later
// (at 900ms), not two at once.
func TestSettleBoundedQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := (&throttle.Limiter{Limits: []throttle.Limit{{Rate: 10, Burst: 5}}}).For("k")
		start := time.Now()
		if err := w.WaitN(t.Context(), 5); err != nil {
			t.Fatal(err)
		}
		second := waitAt(t.Context(), w, 5, start)
		synctest.Wait()
		third := waitAt(t.Context(), w, 5, start)
		time.Sleep(400 * time.Millisecond)
		if err := w.Settle(t.Context(), throttle.Cost{N: 5}, throttle.Cost{N: 0}); err != nil {
			t.Fatal(err)
		}
		for i, tt := range []struct {
			ch   <-chan settled
			want time.Duration
		}{{second, 400 * time.Millisecond}, {third, 900 * time.Millisecond}} {
			if got := <-tt.ch; got.err != nil || got.at != tt.want {
				t.Errorf("wait %d went at %v, %v; want %v, nil", i+2, got.at, got.err, tt.want)
			}
		}
	})
}

// TestSettleDeadline: a charge that moves a sleeping wait's turn past its
// deadline ends it at once, its units given back.
func TestSettleDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := (&throttle.Limiter{Limits: []throttle.Limit{{Rate: 10, Burst: 5}}}).For("k")
		start := time.Now()
		if err := w.WaitN(t.Context(), 5); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 600*time.Millisecond)
		defer cancel()
		next := waitAt(ctx, w, 5, start)
		time.Sleep(100 * time.Millisecond)
		if err := w.Settle(t.Context(), throttle.Cost{N: 5}, throttle.Cost{N: 8}); err != nil {
			t.Fatal(err)
		}
		if got := <-next; !errors.Is(got.err, throttle.ErrWouldExceedDeadline) || got.at != 100*time.Millisecond {
			t.Errorf("a charge moved the turn to 800ms, past the deadline 600ms: the wait returned %v at %v; want ErrWouldExceedDeadline at 100ms", got.err, got.at)
		}
		if err := w.WaitN(t.Context(), 1); err != nil || time.Since(start) != 400*time.Millisecond {
			t.Errorf("a unit after the refused wait: %v at %v; want 400ms (the debt, not the refused units)", err, time.Since(start))
		}
	})
}

// TestSettleNeverOver: 16 goroutines wait for estimates of 1 to 5 units
// and settle each as 50% to 150% of it after a latency; the admissions,
// replayed through GCRA with each wait's units amended at its settle, are
// never early, and the schedule wastes nothing: the settled units over
// 20 s are the burst plus the rate's, within one wait.
func TestSettleNeverOver(t *testing.T) {
	const (
		limit, burst = 10.0, 5
		goroutines   = 16
		run          = 20 * time.Second
	)
	type ev struct {
		at    time.Duration
		units float64 // an admission's, or a settle's amendment
		admit bool
	}
	synctest.Test(t, func(t *testing.T) {
		w := (&throttle.Limiter{Limits: []throttle.Limit{{Rate: limit, Burst: burst}}}).For("k")
		start := time.Now()
		var (
			mu     sync.Mutex
			events []ev
			wg     sync.WaitGroup
		)
		for g := range goroutines {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(g), 1))
				for time.Since(start) < run {
					n := 1 + r.IntN(burst)
					if err := w.WaitN(t.Context(), n); err != nil {
						t.Error(err)
						return
					}
					at := time.Since(start)
					time.Sleep(time.Duration(1+r.IntN(300)) * time.Millisecond)
					actual := int(math.Round(float64(n) * (0.5 + r.Float64())))
					if err := w.Settle(t.Context(), throttle.Cost{N: n}, throttle.Cost{N: actual}); err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					events = append(events, ev{at, float64(n), true}, ev{time.Since(start), float64(actual - n), false})
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		// Replay in time order (schedtest's ledger): at one instant, a
		// give-back is applied when an admission needs it (a settle lets
		// the units whose turns came go first, then amends), a charge
		// after the admissions.
		slices.SortStableFunc(events, func(a, b ev) int { return int(a.at - b.at) })
		interval := float64(time.Second) / limit
		tau := burst * interval
		tat := math.Inf(-1)
		back := func(tat float64, e ev) float64 { return max(tat+e.units*interval, float64(e.at)) }
		settledUnits, admits := 0.0, 0
		for k := 0; k < len(events); {
			j := k
			for j < len(events) && events[j].at == events[k].at {
				j++
			}
			var backs, charges []ev
			for _, e := range events[k:j] {
				switch {
				case !e.admit && e.units < 0:
					backs = append(backs, e)
				case !e.admit:
					charges = append(charges, e)
				}
				if e.at < run {
					settledUnits += e.units
				}
			}
			for _, e := range events[k:j] {
				if !e.admit {
					continue
				}
				t0 := float64(e.at)
				for len(backs) > 0 && tat+e.units*interval-tau > t0+2 {
					tat, backs = back(tat, backs[0]), backs[1:]
				}
				if early := tat + e.units*interval - tau; t0+2 < early {
					t.Fatalf("never over (settled costs): %v units admitted at %v; the bucket allows them from %v", e.units, e.at, time.Duration(early))
				}
				tat = max(tat, t0) + e.units*interval
				if e.at < run {
					admits++
				}
			}
			for _, e := range charges {
				tat = max(tat, float64(e.at)) + e.units*interval
			}
			for _, e := range backs {
				tat = back(tat, e)
			}
			k = j
		}
		// Units a settle after the run charged or gave back are left out
		// on both sides: the bound is the burst and 20 s at the rate,
		// within one wait (5) and the settles in flight at the end.
		ideal := burst + limit*run.Seconds()
		t.Logf("%d waits in %v: %.0f units as settled; burst + rate·t = %.0f", admits, run, settledUnits, ideal)
		if settledUnits > ideal+2*burst*goroutines || settledUnits < ideal-2*burst*goroutines {
			t.Errorf("%.0f units as settled in %v; want %.0f ± %d", settledUnits, run, ideal, 2*burst*goroutines)
		}
	})
}

// TestSettleUnits: a cost settled in the tokens unit moves the tokens
// limits, exactly: a bucket's queued turn earlier by the units given back
// (never past a full bucket), later by a charge; a window's count down by
// a give-back (in the window the units went) and up by a charge.
func TestSettleUnits(t *testing.T) {
	tokens := func(n int) map[string]int { return map[string]int{"tokens": n} }
	for _, tt := range []struct {
		name   string
		limit  throttle.Limit
		used   int           // the first wait's 1,000 tokens, settled as used
		second int           // the second wait's tokens
		want   time.Duration // when the second wait goes
	}{
		// 1,000 tokens a second, 1,000 at once: 1,000 spent, 620 used →
		// 380 back: 800 tokens go after 420 ms, not 800 ms.
		{"bucket give-back", throttle.Limit{Unit: "tokens", Rate: 1000, Burst: 1000}, 620, 800, 420 * time.Millisecond},
		// 1,500 used: a debt of 500, 800 tokens go after 1.3 s.
		{"bucket charge", throttle.Limit{Unit: "tokens", Rate: 1000, Burst: 1000}, 1500, 800, 1300 * time.Millisecond},
		// All given back: the bucket is full again, and no more than full
		// (1,001 would exceed its burst: 1,000 go now, the 1,001st later).
		{"bucket give-back all", throttle.Limit{Unit: "tokens", Rate: 1000, Burst: 1000}, 0, 1000, 0},
		// 1,000 per 2 s window: 380 back leaves room for 380 more now.
		{"window give-back", throttle.Limit{Unit: "tokens", Count: 1000, Per: 2 * time.Second}, 620, 380, 0},
		{"window give-back short", throttle.Limit{Unit: "tokens", Count: 1000, Per: 2 * time.Second}, 620, 381, 2 * time.Second},
		// 1,500 used in a window of 2,000: 500 left, not 1,000.
		{"window charge", throttle.Limit{Unit: "tokens", Count: 2000, Per: 2 * time.Second}, 1500, 501, 2 * time.Second},
		{"window charge fits", throttle.Limit{Unit: "tokens", Count: 2000, Per: 2 * time.Second}, 1500, 500, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// Start on a window's boundary (the bubble's clock is
				// 2000-01-01 UTC, a multiple of 2 s since the epoch).
				lim := (&throttle.Limiter{Limits: []throttle.Limit{tt.limit}}).For("k")
				ctx := context.Background()
				spent := throttle.Cost{N: 1, Units: tokens(1000)}
				if err := lim.Wait(ctx, spent); err != nil {
					t.Fatal(err)
				}
				if err := lim.Settle(ctx, spent, throttle.Cost{N: 1, Units: tokens(tt.used)}); err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				if err := lim.Wait(ctx, throttle.Cost{N: 1, Units: tokens(tt.second)}); err != nil {
					t.Fatal(err)
				}
				if got := time.Since(start); got != tt.want {
					t.Errorf("second wait of %d tokens went after %v; want %v", tt.second, got, tt.want)
				}
			})
		})
	}
}

// TestSettleUnitsQueued: a give-back moves a queued wait's turn earlier at
// once, and a charge later: its sleeper learns it.
func TestSettleUnitsQueued(t *testing.T) {
	for _, tt := range []struct {
		name string
		used int
		want time.Duration
	}{{"give-back", 600, 600 * time.Millisecond}, {"charge", 1200, 1200 * time.Millisecond}} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lim := (&throttle.Limiter{Limits: []throttle.Limit{{Unit: "tokens", Rate: 1000, Burst: 1000}}}).For("k")
				ctx := context.Background()
				spent := throttle.Cost{N: 1, Units: map[string]int{"tokens": 1000}}
				if err := lim.Wait(ctx, spent); err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				done := make(chan time.Duration)
				go func() {
					lim.Wait(ctx, spent) // queued: due at 1 s
					done <- time.Since(start)
				}()
				synctest.Wait()
				if err := lim.Settle(ctx, spent, throttle.Cost{N: 1, Units: map[string]int{"tokens": tt.used}}); err != nil {
					t.Fatal(err)
				}
				if got := <-done; got != tt.want {
					t.Errorf("queued wait went after %v; want %v", got, tt.want)
				}
			})
		})
	}
}

// TestSettleUnitsErrors: a unit the key has no limit in, a negative cost,
// or a spent cost no wait could spend fails and changes nothing.
func TestSettleUnitsErrors(t *testing.T) {
	lim := &throttle.Limiter{Limits: []throttle.Limit{{Unit: "tokens", Rate: 1000, Burst: 1000}}}
	ctx := context.Background()
	k := lim.For("a")
	tok := func(n int) throttle.Cost { return throttle.Cost{N: 1, Units: map[string]int{"tokens": n}} }
	for _, tt := range []struct {
		name          string
		spent, actual throttle.Cost
		want          error
	}{
		{"unknown unit", tok(10), throttle.Cost{N: 1, Units: map[string]int{"bytes": 1}}, throttle.ErrInvalidLimit},
		{"negative", tok(10), tok(-1), throttle.ErrInvalidLimit},
		{"past burst", tok(1001), tok(10), throttle.ErrCostExceedsBurst},
	} {
		if err := k.Settle(ctx, tt.spent, tt.actual); !errors.Is(err, tt.want) {
			t.Errorf("%s: Settle = %v; want %v", tt.name, err, tt.want)
		}
	}
	if ok, _, _ := lim.For("a").Try(ctx, tok(1000)); !ok {
		t.Errorf("after failed settles, Try(1000 tokens) on a full bucket = false")
	}
}
