package throttle

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/throttle-go/throttle/internal/schedule"
	"github.com/throttle-go/throttle/internal/strict"
)

// TestLimitsTurns checks the turns of waits on a key with two limits,
// each wait called at 0 in order (a goroutine each, FIFO), against the
// turns worked out by hand from schedule_limits.go's rule.
func TestLimitsTurns(t *testing.T) {
	tok := func(n int) Cost { return Cost{N: 1, Units: map[string]int{"tokens": n}} }
	req := func(n int) Cost { return Cost{N: 1, Units: map[string]int{"requests": n}} }
	tests := []struct {
		name   string
		l      *Limiter
		pause  time.Duration // paused from 0 for this long
		costs  []Cost
		want   []time.Duration
		errors []error // nil: none
	}{
		{
			// requests 10/s burst 2; tokens 100/s burst 100. Tokens bind:
			// 60 at 0 (tat 600 ms), the next 60 once 20 have refilled.
			name:  "tokens bind",
			l:     &Limiter{Limits: []Limit{{Rate: 10, Burst: 2}, {Unit: "tokens", Rate: 100, Burst: 100}}},
			costs: []Cost{tok(60), tok(60), tok(60)},
			want:  []time.Duration{0, 200 * time.Millisecond, 800 * time.Millisecond},
		},
		{
			// Requests bind: 1/s burst 1; the tokens' bucket is deep.
			name:  "requests bind",
			l:     &Limiter{Limits: []Limit{{Rate: 1, Burst: 1}, {Unit: "tokens", Rate: 1000, Burst: 1000}}},
			costs: []Cost{tok(10), tok(10), {N: 1}},
			want:  []time.Duration{0, time.Second, 2 * time.Second},
		},
		{
			// A pause holds both token-heavy waits: the second pays for its
			// tokens from the pause's end (no credit from before the first
			// could go), 500 ms after the first.
			name:  "no credit from before a wait could go",
			l:     &Limiter{Limits: []Limit{{Unit: "tokens", Rate: 10, Burst: 5}}},
			pause: 10 * time.Second,
			costs: []Cost{tok(5), tok(5), {N: 1}},
			want:  []time.Duration{10 * time.Second, 10500 * time.Millisecond, 10500 * time.Millisecond},
		},
		{
			// FIFO: a wait of no tokens waits behind one that waits for
			// tokens.
			name:  "fifo",
			l:     &Limiter{Limits: []Limit{{Rate: 100, Burst: 10}, {Unit: "tokens", Rate: 10, Burst: 10}}},
			costs: []Cost{tok(10), tok(5), {N: 3}},
			want:  []time.Duration{0, 500 * time.Millisecond, 500 * time.Millisecond},
		},
		{
			// A fixed window of 3 per second (the bubble's clock starts on
			// a whole second): the fourth goes when the next window opens.
			name:  "fixed window",
			l:     &Limiter{Limits: []Limit{{Unit: "requests", Count: 3, Per: time.Second}}},
			costs: []Cost{req(1), req(2), req(1), req(3)},
			want:  []time.Duration{0, 0, time.Second, 2 * time.Second},
		},
		{
			// A sliding window counter of 4 per second: 4 at 0, then the
			// next once 4·(1 − f) + 1 ≤ 4 (f = ¼ into the next window),
			// the one after at 4·(1 − f) + 2 ≤ 4 (f = ½).
			name:  "sliding window",
			l:     &Limiter{Limits: []Limit{{Unit: "requests", Count: 4, Per: time.Second, Kind: Sliding}}},
			costs: []Cost{req(4), req(1), req(1)},
			want:  []time.Duration{0, 1250 * time.Millisecond, 1500 * time.Millisecond},
		},
		{
			// A sliding log of 3 per second, from 500 ms (a pause): 3 at
			// 500 ms, then 3 more once those left (1.5 s; a fixed window
			// would let them at 1 s, 6 in the second from 500 ms), then 1
			// once those left too.
			name:  "sliding log",
			l:     &Limiter{Limits: []Limit{{Unit: "requests", Count: 3, Per: time.Second, Kind: SlidingLog}}},
			pause: 500 * time.Millisecond,
			costs: []Cost{req(3), req(3), req(1)},
			want:  []time.Duration{500 * time.Millisecond, 1500 * time.Millisecond, 2500 * time.Millisecond},
		},
		{
			// A sliding log of 3 per second paced at 4 a second: 1 at 0,
			// 2 at 250 ms, then 1 once the unit at 0 left (1 s), then 2
			// once the 2 at 250 ms left (1.25 s), each turn the time the
			// newest entry that must leave leaves.
			name:  "sliding log paced",
			l:     &Limiter{Limits: []Limit{{Rate: 4, Burst: 1}, {Unit: "requests", Count: 3, Per: time.Second, Kind: SlidingLog}}},
			costs: []Cost{req(1), req(2), req(1), req(2)},
			want:  []time.Duration{0, 250 * time.Millisecond, time.Second, 1250 * time.Millisecond},
		},
		{
			// A window of 3 per second from first use, from 500 ms (a
			// pause): 3 at 500 ms, then the next window opens at 1.5 s
			// (an epoch-aligned one would at 1 s), and takes 1 + 2; the
			// next at 2.5 s.
			name:  "window from first use",
			l:     &Limiter{Limits: []Limit{{Unit: "requests", Count: 3, Per: time.Second, Kind: FromFirstUse}}},
			pause: 500 * time.Millisecond,
			costs: []Cost{req(3), req(1), req(2), req(1)},
			want:  []time.Duration{500 * time.Millisecond, 1500 * time.Millisecond, 1500 * time.Millisecond, 2500 * time.Millisecond},
		},
		{
			name:   "a window of no kind",
			l:      &Limiter{Limits: []Limit{{Unit: "requests", Count: 3, Per: time.Second, Kind: FromFirstUse + 1}}},
			costs:  []Cost{req(1)},
			want:   []time.Duration{0},
			errors: []error{ErrInvalidLimit},
		},
		{
			name:   "sliding log above MaxLogCount",
			l:      &Limiter{Limits: []Limit{{Unit: "requests", Count: MaxLogCount + 1, Per: time.Second, Kind: SlidingLog}}},
			costs:  []Cost{req(1)},
			want:   []time.Duration{0},
			errors: []error{ErrInvalidLimit},
		},
		{
			name:  "sliding log at MaxLogCount",
			l:     &Limiter{Limits: []Limit{{Unit: "requests", Count: MaxLogCount, Per: time.Second, Kind: SlidingLog}}},
			costs: []Cost{req(MaxLogCount), req(1)},
			want:  []time.Duration{0, time.Second},
		},
		{
			// A bucket and a window in one unit: each takes the cost.
			name:  "bucket and window",
			l:     &Limiter{Limits: []Limit{{Unit: "requests", Rate: 10, Burst: 2, Count: 3, Per: time.Second}}},
			costs: []Cost{req(1), req(1), req(1), req(1)},
			want:  []time.Duration{0, 0, 100 * time.Millisecond, time.Second},
		},
		{
			name:   "errors",
			l:      &Limiter{Limits: []Limit{{Unit: "tokens", Rate: 10, Burst: 5}}},
			costs:  []Cost{tok(6), {Units: map[string]int{"bytes": 1}}, tok(-1), tok(5)},
			want:   []time.Duration{0, 0, 0, 0},
			errors: []error{ErrCostExceedsBurst, ErrInvalidLimit, ErrInvalidLimit, nil},
		},
		{
			// The first limit's units are a cost's N, never named.
			name:   "the first limit's unit named",
			l:      &Limiter{Limits: []Limit{{Rate: 10, Burst: 5}, {Unit: "tokens", Rate: 10, Burst: 5}}},
			costs:  []Cost{{Units: map[string]int{"": 1}}},
			want:   []time.Duration{0},
			errors: []error{ErrInvalidLimit},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := tt.l
				w := l.For("k")
				if tt.pause > 0 {
					w.Pause(t.Context(), tt.pause)
				}
				start := time.Now()
				got := make([]time.Duration, len(tt.costs))
				errs := make([]error, len(tt.costs))
				var wg sync.WaitGroup
				for i, c := range tt.costs {
					wg.Go(func() {
						errs[i] = w.Wait(t.Context(), c)
						got[i] = time.Since(start)
					})
					synctest.Wait() // called in order
				}
				wg.Wait()
				for i := range got {
					var want error
					if tt.errors != nil {
						want = tt.errors[i]
					}
					if got[i] != tt.want[i] || !errors.Is(errs[i], want) || (want == nil) != (errs[i] == nil) {
						t.Errorf("wait %d (%+v) returned %v at %v; want %v at %v", i, tt.costs[i], errs[i], got[i], want, tt.want[i])
					}
				}
			})
		})
	}
}

// TestLimitsCancel checks that a cancelled wait gives its units back on
// every limit: the wait behind it takes its turn.
func TestLimitsCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limits: []Limit{{Rate: 10, Burst: 1}, {Unit: "tokens", Rate: 10, Burst: 10}}}
		w := l.For("k")
		tok := func(n int) Cost { return Cost{N: 1, Units: map[string]int{"tokens": n}} }
		start := time.Now()
		if err := w.Wait(t.Context(), tok(10)); err != nil { // tokens until 1 s
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		var errB, errC error
		var atC time.Duration
		wg.Go(func() { errB = w.Wait(ctx, tok(10)) }) // 1 s
		synctest.Wait()
		wg.Go(func() { errC = w.Wait(t.Context(), tok(10)); atC = time.Since(start) }) // 2 s, 1 s once B is gone
		synctest.Wait()
		time.Sleep(100 * time.Millisecond)
		cancel()
		wg.Wait()
		if !errors.Is(errB, context.Canceled) || errC != nil || atC != time.Second {
			t.Errorf("cancelled B: %v; C: %v at %v; want context.Canceled; nil at 1s", errB, errC, atC)
		}
	})
}

// TestLimitsTransport checks that a Transport's Units spend on the key's
// further limits: requests of 60 tokens against 100 tokens a second
// (burst 100), the requests' own limit far off, one at a time. A retry
// (a 429 with Retry-After: 1 on the second request) spends its tokens
// again, at its turn.
func TestLimitsTransport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var sent []time.Duration
		var calls int
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			calls++
			sent = append(sent, time.Since(start))
			if calls == 2 {
				return respond(r, http.StatusTooManyRequests, "Retry-After", "1"), nil
			}
			return respond(r, http.StatusOK), nil
		})
		l := &Limiter{Limits: []Limit{{Rate: 1000, Burst: 10}, {Unit: "tokens", Rate: 100, Burst: 100}}}
		tr := &Transport{Base: base, Waiter: l, DisableAdaptive: true,
			CostOf: func(*http.Request) Cost { return Cost{N: 1, Units: map[string]int{"tokens": 60}} }}
		client := &http.Client{Transport: tr}
		for range 3 {
			resp, err := client.Get("http://api.example.com/")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		// 0; 200 ms, once 20 tokens refilled (429: paused until 1.2 s);
		// the retry at 1.2 s (its tokens there since 400 ms), leaving 40;
		// the third once 20 more refilled: 1.4 s.
		want := []time.Duration{0, 200 * time.Millisecond, 1200 * time.Millisecond, 1400 * time.Millisecond}
		if !slices.Equal(sent, want) {
			t.Errorf("attempts sent at %v; want %v", sent, want)
		}
	})
}

// TestLimitsState checks the view of a key's further limits: what each
// holds once the queued waits have spent theirs, and Next behind them.
func TestLimitsState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limits: []Limit{
			{Rate: 100, Burst: 10},
			{Unit: "tokens", Rate: 10, Burst: 10},
			{Unit: "requests", Count: 5, Per: time.Second},
		}}
		w := l.For("k")
		cost := Cost{N: 1, Units: map[string]int{"tokens": 8, "requests": 1}}
		if err := w.Wait(t.Context(), cost); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go w.Wait(ctx, cost) // queued until 600 ms (tokens)
		synctest.Wait()
		st := keyState(l, "k")
		want := []LimitState{{Unit: "tokens", Remaining: -6}, {Unit: "requests", Window: true, Remaining: 3}}
		if !slices.Equal(st.Limits, want) || st.Next != 600*time.Millisecond {
			t.Errorf("State.Limits %+v, State.Next %v; want %+v, 600ms", st.Limits, st.Next, want)
		}
		cancel()
		synctest.Wait()
	})
}

// TestLimitsTry checks Try of a cost: spent on every limit now, or nothing,
// with the delay a wait would have.
func TestLimitsTry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limits: []Limit{{Rate: 100, Burst: 10}, {Unit: "tokens", Rate: 10, Burst: 10}}}
		w := l.For("k")
		tok := func(n int) Cost { return Cost{N: 1, Units: map[string]int{"tokens": n}} }
		for i, tt := range []struct {
			tokens  int
			ok      bool
			retryIn time.Duration
		}{
			{8, true, 0},
			{8, false, 600 * time.Millisecond}, // 2 left: nothing spent
			{2, true, 0},
			{1, false, 100 * time.Millisecond},
		} {
			ok, d, err := w.Try(t.Context(), tok(tt.tokens))
			if ok != tt.ok || d != tt.retryIn || err != nil {
				t.Errorf("try %d (%d tokens) = %v, %v, %v; want %v, %v, nil", i, tt.tokens, ok, d, err, tt.ok, tt.retryIn)
			}
		}
		if st := keyState(l, "k"); st.Tokens != 8 {
			t.Errorf("requests' bucket holds %v; want 8 (two tries went)", st.Tokens)
		}
	})
}

// TestLimitsShortFormsSpendFirstUnit: WaitN, AllowN and ReserveN count
// the units of every limit of Unit "", as Wait of Cost{N: n} does: a
// window of 3 an hour as the only limit admits 3 of them, one each, and
// refuses the fourth (AllowN false, WaitN past its deadline, ReserveN's
// turn an hour away); a WaitN larger than the window fails.
func TestLimitsShortFormsSpendFirstUnit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limits: []Limit{{Count: 3, Per: time.Hour, Kind: SlidingLog}}}
		k := l.For("k")
		if err := k.WaitN(t.Context(), 1); err != nil {
			t.Fatalf("WaitN(1) = %v", err)
		}
		if !k.AllowN(1) {
			t.Fatalf("AllowN(1) of the second unit = false")
		}
		r, err := k.ReserveN(t.Context(), 1)
		if err != nil || r.Delay() != 0 {
			t.Fatalf("ReserveN(1) of the third unit = %v, delay %v; want at once", err, r.Delay())
		}
		if k.AllowN(1) {
			t.Errorf("AllowN(1) of a fourth unit in the hour = true; want false")
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if err := k.WaitN(ctx, 1); !errors.Is(err, ErrWouldExceedDeadline) {
			t.Errorf("WaitN(1) of a fourth unit, a minute's deadline = %v; want ErrWouldExceedDeadline", err)
		}
		if r, err := k.ReserveN(t.Context(), 1); err != nil || r.Delay() != time.Hour {
			t.Errorf("ReserveN(1) of a fourth unit = %v, delay %v; want an hour", err, r.Delay())
		} else {
			r.Cancel()
		}
		if err := k.WaitN(t.Context(), 4); !errors.Is(err, ErrCostExceedsBurst) {
			t.Errorf("WaitN(4) of a window of 3 = %v; want ErrCostExceedsBurst", err)
		}
	})
}

// TestLimitsOverrides checks that a key of Overrides has its own
// further limits, and the others Limits.
func TestLimitsOverrides(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{
			Limits:    []Limit{{Unit: "tokens", Rate: 10, Burst: 10}},
			Overrides: map[string][]Limit{"big": {{Unit: "tokens", Rate: 10, Burst: 100}}, "none": {}},
		}
		tok := Cost{N: 1, Units: map[string]int{"tokens": 50}}
		for _, tt := range []struct {
			key  string
			want error
		}{{"k", ErrCostExceedsBurst}, {"big", nil}, {"none", ErrInvalidLimit}} {
			if err := l.For(tt.key).Wait(t.Context(), tok); !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Errorf("%q: Wait(50 tokens) = %v; want %v", tt.key, err, tt.want)
			}
		}
	})
}

// TestLimitsFirstUse checks that a window aligned to first use starts
// at the first units that go once the one before ended, not at the end
// of the one before: 3 per second, 3 at 0, 3 at 1.7 s (a quiet spell),
// the next at 2.7 s (an epoch-aligned window would let it at 2 s).
func TestLimitsFirstUse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limits: []Limit{{Unit: "requests", Count: 3, Per: time.Second, Kind: FromFirstUse}}}
		w := l.For("k")
		req := func(n int) Cost { return Cost{N: 1, Units: map[string]int{"requests": n}} }
		start := time.Now()
		for i, step := range []struct {
			sleep time.Duration
			n     int
			want  time.Duration
		}{{0, 3, 0}, {1700 * time.Millisecond, 3, 1700 * time.Millisecond}, {0, 1, 2700 * time.Millisecond}} {
			time.Sleep(step.sleep)
			if err := w.Wait(t.Context(), req(step.n)); err != nil || time.Since(start) != step.want {
				t.Errorf("wait %d of %d: %v at %v; want nil at %v", i, step.n, err, time.Since(start), step.want)
			}
		}
		if got := keyState(l, "k").Limits; len(got) != 1 || got[0].Remaining != 2 {
			t.Errorf("State.Limits = %+v; want 2 remaining in the window from 2.7 s", got)
		}
	})
}

// TestLimitsLogBounded checks that a sliding log keeps no more than
// Count entries: 100 waits of a unit, paced at one each 40 ms (an entry
// each), through a log of 5 per 200 ms (4 s in the bubble), the log's
// length checked after each: 5 once full, the oldest leaving as the
// next joins.
func TestLimitsLogBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limits: []Limit{{Rate: 25, Burst: 1}, {Unit: "requests", Count: 5, Per: 200 * time.Millisecond, Kind: SlidingLog}}}
		w := l.For("k")
		b := l.key("k")
		start := time.Now()
		for i := range 100 {
			if err := w.Wait(t.Context(), Cost{N: 1, Units: map[string]int{"requests": 1}}); err != nil {
				t.Fatal(err)
			}
			var n int
			b.k().Inspect(func(_ float64, s *schedule.State, _ schedule.Config, _ *strict.Key) {
				n = s.Limits()[0].Entries()
			})
			if want := min(i+1, 5); n != want {
				t.Fatalf("after wait %d the log holds %d entries; want %d", i, n, want)
			}
		}
		if d := time.Since(start); d != 99*40*time.Millisecond {
			t.Errorf("100 waits took %v; want %v", d, 99*40*time.Millisecond)
		}
	})
}

// TestLimitsReserve: a reservation of a cost takes its place on every
// limit, as Wait does, and its Cancel gives every unit back: tokens
// 100/s burst 100, 60 tokens a reservation. The first goes at once; the
// second's turn is 200 ms away (40 left, 20 more at 100/s); cancelled,
// its tokens serve a try of 40 at once; a third then waits 600 ms.
func TestLimitsReserve(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limits: []Limit{{Rate: 100, Burst: 10}, {Unit: "tokens", Rate: 100, Burst: 100}}}
		ctx := context.Background()
		k := l.For("k")
		c := Cost{N: 1, Units: map[string]int{"tokens": 60}}
		r1, err := k.Reserve(ctx, c)
		if err != nil || r1.Delay() != 0 {
			t.Fatalf("first reservation = %v, delay %v; want at once", err, r1.Delay())
		}
		r2, err := k.Reserve(ctx, c)
		if err != nil || r2.Delay() != 200*time.Millisecond {
			t.Fatalf("second reservation = %v, delay %v; want 200ms", err, r2.Delay())
		}
		r2.Cancel()
		if ok, _, err := l.For("k").Try(ctx, Cost{N: 1, Units: map[string]int{"tokens": 40}}); !ok || err != nil {
			t.Fatalf("try of the 40 tokens left after the cancel = %v, %v; want it to go", ok, err)
		}
		r3, err := k.Reserve(ctx, c)
		if err != nil || r3.Delay() != 600*time.Millisecond {
			t.Fatalf("third reservation = %v, delay %v; want 600ms (none left, 60 at 100/s)", err, r3.Delay())
		}
		if err := r3.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := k.Reserve(ctx, Cost{N: 1, Units: map[string]int{"tokens": 101}}); !errors.Is(err, ErrCostExceedsBurst) {
			t.Errorf("a reservation of 101 tokens = %v; want ErrCostExceedsBurst (burst 100)", err)
		}
	})
}

// TestCostWithoutFirstUnit: a wait that names units of further limits but
// no unit of the first limit (N 0) is refused with ErrInvalidLimit and
// spends nothing, rather than going for free; a zero Cost is nothing.
func TestCostWithoutFirstUnit(t *testing.T) {
	l := &Limiter{Limits: []Limit{{Rate: 10, Burst: 1}, {Unit: "tokens", Rate: 100, Burst: 100}}}
	q := l.For("k")
	ctx := context.Background()
	tok := Cost{Units: map[string]int{"tokens": 100}}
	if err := q.Wait(ctx, tok); !errors.Is(err, ErrInvalidLimit) {
		t.Errorf("Wait of 100 tokens and N 0 = %v; want ErrInvalidLimit", err)
	}
	if _, _, err := q.Try(ctx, tok); !errors.Is(err, ErrInvalidLimit) {
		t.Errorf("Try of 100 tokens and N 0: %v; want ErrInvalidLimit", err)
	}
	if _, err := q.Reserve(ctx, tok); !errors.Is(err, ErrInvalidLimit) {
		t.Errorf("Reserve of 100 tokens and N 0: %v; want ErrInvalidLimit", err)
	}
	if err := q.Wait(ctx, Cost{}); err != nil {
		t.Errorf("Wait of the zero Cost = %v; want nil (nothing to spend)", err)
	}
	st, _ := q.State(ctx)
	if len(st.Limits) != 1 || st.Limits[0].Remaining != 100 {
		t.Errorf("tokens left %+v; want 100 (nothing spent)", st.Limits)
	}
}

// TestLimiterCheck: Check reports an invalid limit once, at setup, as
// every operation of the key would, naming the override it is in; a
// valid configuration is nil.
func TestLimiterCheck(t *testing.T) {
	ctx := context.Background()
	ok := &Limiter{Limits: []Limit{{Rate: 10, Burst: 1}}, Overrides: map[string][]Limit{"b": {{Count: 5, Per: time.Second}}}}
	if err := ok.Check(ctx); err != nil {
		t.Errorf("Check of a valid configuration = %v", err)
	}
	bad := &Limiter{Limits: []Limit{{Rate: 10, Burst: 1}, {Unit: "tokens", Count: -1, Per: time.Second}}}
	if err := bad.Check(ctx); !errors.Is(err, ErrInvalidLimit) {
		t.Errorf("Check of a count of -1 = %v; want ErrInvalidLimit", err)
	}
	if err := bad.For("k").Wait(ctx); !errors.Is(err, ErrInvalidLimit) {
		t.Errorf("Wait under a count of -1 = %v; want ErrInvalidLimit, as Check said", err)
	}
	over := &Limiter{Limits: []Limit{{Rate: 10, Burst: 1}}, Overrides: map[string][]Limit{"b": {{Count: 5, Per: -time.Second}}}}
	if err := over.Check(ctx); !errors.Is(err, ErrInvalidLimit) || !strings.Contains(err.Error(), `Overrides["b"]`) {
		t.Errorf("Check of an invalid override = %v; want ErrInvalidLimit naming Overrides[\"b\"]", err)
	}
}
