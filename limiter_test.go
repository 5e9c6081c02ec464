package throttle

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/throttle-go/throttle/internal/local"
	"golang.org/x/time/rate"
)

// TestLimiterPace checks that N waits at rate r with burst b take exactly
// (N-b)/r, whatever the cost unit and however many goroutines wait.
func TestLimiterPace(t *testing.T) {
	tests := []struct {
		name       string
		limit      rate.Limit
		burst      int
		n, workers int
		want       time.Duration
	}{
		{"serial", 100, 10, 110, 1, time.Second},
		{"concurrent", 100, 10, 310, 8, 3 * time.Second},
		{"burst one", 4, 1, 9, 3, 2 * time.Second},
		{"one per minute", rate.Every(time.Minute), 1, 3, 1, 2 * time.Minute},
		{"within burst", 10, 20, 20, 4, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := &Limiter{Limit: tt.limit, Burst: tt.burst}
				start := time.Now()
				var wg sync.WaitGroup
				per := tt.n / tt.workers
				for w := range tt.workers {
					k := per
					if w == 0 {
						k += tt.n % tt.workers
					}
					wg.Go(func() {
						for range k {
							if err := l.For("k").WaitN(t.Context(), 1); err != nil {
								t.Errorf("WaitN: %v", err)
							}
						}
					})
				}
				wg.Wait()
				if got := time.Since(start); got != tt.want {
					t.Errorf("%d waits at %v/s burst %d took %v; want %v", tt.n, tt.limit, tt.burst, got, tt.want)
				}
			})
		})
	}
}

// TestLimiterCost checks that a cost of n spends n units.
func TestLimiterCost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limit: 10, Burst: 10}
		start := time.Now()
		for range 5 {
			if err := l.WaitN(t.Context(), 10); err != nil {
				t.Fatal(err)
			}
		}
		// 50 units, 10 from the burst, 40 at 10/s.
		if got, want := time.Since(start), 4*time.Second; got != want {
			t.Errorf("5 waits of 10 units at 10/s burst 10 took %v; want %v", got, want)
		}
	})
}

func TestLimiterBadInput(t *testing.T) {
	tests := []struct {
		name string
		l    *Limiter
		n    int
		want error
	}{
		{"cost above burst", &Limiter{Limit: 1, Burst: 5}, 6, ErrCostExceedsBurst},
		{"negative cost", &Limiter{Limit: 1, Burst: 5}, -1, ErrInvalidLimit},
		{"negative limit", &Limiter{Limit: -1, Burst: 5}, 1, ErrInvalidLimit},
		{"negative burst", &Limiter{Limit: 1, Burst: -5}, 1, ErrInvalidLimit},
		{"NaN limit", &Limiter{Limit: rate.Limit(math.NaN()), Burst: 1}, 1, ErrInvalidLimit},
		{"override cost above burst", &Limiter{Overrides: map[string]Rate{"x": {Limit: 1, Burst: 2}}}, 3, ErrCostExceedsBurst},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.l.For("x").WaitN(context.Background(), tt.n)
			if !errors.Is(err, tt.want) {
				t.Errorf("WaitN(%d) = %v; want %v", tt.n, err, tt.want)
			}
		})
	}
	// Unlimited: any cost passes at once; zero cost is a no-op.
	var l Limiter
	for _, n := range []int{0, 1, 1 << 30} {
		if err := l.WaitN(context.Background(), n); err != nil {
			t.Errorf("zero Limiter WaitN(%d) = %v; want nil", n, err)
		}
	}
}

func TestLimiterOverrides(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limit: 10, Burst: 1, Overrides: map[string]Rate{"slow": {Limit: 1, Burst: 1}}}
		took := func(key string, n int) time.Duration {
			start := time.Now()
			for range n {
				if err := l.For(key).WaitN(t.Context(), 1); err != nil {
					t.Fatal(err)
				}
			}
			return time.Since(start)
		}
		if got, want := took("fast", 11), time.Second; got != want {
			t.Errorf("11 waits on the default 10/s key took %v; want %v", got, want)
		}
		if got, want := took("slow", 3), 2*time.Second; got != want {
			t.Errorf("3 waits on the 1/s override took %v; want %v", got, want)
		}
		if got, want := took("other", 1), time.Duration(0); got != want {
			t.Errorf("a fresh key waited %v; want %v", got, want)
		}
	})
}

// TestLimiterDeadline checks that a wait past the deadline fails at once,
// matches both sentinels, and reserves nothing.
func TestLimiterDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limit: 1, Burst: 1}
		b := l.For("k")
		if err := b.WaitN(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := b.WaitN(ctx, 1)
		if time.Since(start) != 0 {
			t.Errorf("a wait past the deadline blocked %v; want 0", time.Since(start))
		}
		if !errors.Is(err, ErrWouldExceedDeadline) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %v; want one matching ErrWouldExceedDeadline and context.DeadlineExceeded", err)
		}
		var te interface{ Timeout() bool }
		if !errors.As(err, &te) || !te.Timeout() {
			t.Errorf("err = %v; want Timeout() == true", err)
		}
		// Nothing was reserved: the next turn is still at 1 s.
		if err := b.WaitN(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
		if got, want := time.Since(start), time.Second; got != want {
			t.Errorf("next wait ended after %v; want %v", got, want)
		}
	})
}

// TestLimiterCancelRefund checks that a wait whose ctx ends gives back
// exactly its units, also when other reservations follow it (where
// rate.Reservation.Cancel restores fewer, golang/go#56924).
func TestLimiterCancelRefund(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limit: 1, Burst: 5}
		b := l.For("k")
		if err := b.WaitN(t.Context(), 5); err != nil { // empty the bucket at t=0
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancelled := make(chan error)
		go func() { cancelled <- b.WaitN(ctx, 3) }() // turn at 3 s
		synctest.Wait()
		follower := make(chan time.Duration)
		start := time.Now()
		go func() { // reserves behind it: turn at 4 s
			b.WaitN(t.Context(), 1)
			follower <- time.Since(start)
		}()
		time.Sleep(time.Second)
		cancel()
		if err := <-cancelled; !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled wait = %v; want context.Canceled", err)
		}
		// At 1 s the 3 units are back: the follower moves up to the first
		// of them (1 s), and the next waits take the next ones, after
		// the follower (FIFO): 2 s and 3 s.
		if got, want := <-follower, time.Second; got != want {
			t.Errorf("follower's turn was %v; want %v (it moves up)", got, want)
		}
		for i, want := range []time.Duration{2 * time.Second, 3 * time.Second} {
			if err := b.WaitN(t.Context(), 1); err != nil {
				t.Fatal(err)
			}
			if got := time.Since(start); got != want {
				t.Errorf("wait %d after the refund ended at %v; want %v", i, got, want)
			}
		}
	})
}

// TestLimiterPause checks that a paused key holds off every caller until
// the pause ends, then serves them at the configured pace.
func TestLimiterPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limit: 10, Burst: 2}
		b := l.For("k")
		start := time.Now()
		if err := b.(Pauser).Pause(t.Context(), 2*time.Second); err != nil {
			t.Fatal(err)
		}
		b.(Pauser).Pause(t.Context(), time.Second) // shorter: no effect
		var mu sync.Mutex
		var ends []time.Duration
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				if err := b.WaitN(t.Context(), 1); err != nil {
					t.Error(err)
				}
				mu.Lock()
				ends = append(ends, time.Since(start))
				mu.Unlock()
			})
		}
		wg.Wait()
		// Two at 2 s (the burst), then 10/s.
		want := []time.Duration{2 * time.Second, 2 * time.Second, 2100 * time.Millisecond, 2200 * time.Millisecond}
		if fmt.Sprint(ends) != fmt.Sprint(want) {
			t.Errorf("waits ended at %v; want %v", ends, want)
		}
		// Other keys are not paused.
		s := time.Now()
		l.For("other").WaitN(t.Context(), 1)
		if time.Since(s) != 0 {
			t.Errorf("another key waited %v during the pause; want 0", time.Since(s))
		}
		// A pause past the deadline fails at once.
		b.(Pauser).Pause(t.Context(), time.Minute)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if err := b.WaitN(ctx, 1); !errors.Is(err, ErrWouldExceedDeadline) {
			t.Errorf("wait in a long pause = %v; want ErrWouldExceedDeadline", err)
		}
	})
}

// TestLimiterManyKeys checks that memory stays bounded: full buckets are
// forgotten as new keys arrive, and MaxKeys caps the rest.
func TestLimiterManyKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limit: 100, Burst: 1}
		peak := 0
		const n = 100_000
		for i := range n {
			if err := l.For(fmt.Sprint("tenant-", i)).WaitN(t.Context(), 1); err != nil {
				t.Fatal(err)
			}
			peak = max(peak, l.Len())
			if i%100 == 99 {
				time.Sleep(10 * time.Millisecond) // earlier buckets refill
			}
		}
		// Buckets refill in 10 ms, so only the last 100 keys hold state;
		// sweeps run when the count doubles from at least 1024.
		if peak > 2*local.MinSweep {
			t.Errorf("%d distinct keys: peak of %d remembered; want at most %d", n, peak, 2*local.MinSweep)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		// No time passes: every bucket is in use, MaxKeys bounds them.
		l := &Limiter{Limit: 1, Burst: 1, MaxKeys: 5000}
		peak := 0
		for i := range 20_000 {
			l.For(fmt.Sprint("k", i)).WaitN(t.Context(), 1)
			peak = max(peak, l.Len())
		}
		if peak > 5000 {
			t.Errorf("MaxKeys 5000: peak of %d remembered", peak)
		}
	})
}

// TestLimiterForgottenHandle checks that a handle from For kept across a
// sweep still shares the key's quota.
func TestLimiterForgottenHandle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limit: 1, Burst: 1}
		old := l.For("k")
		for i := range 3 * local.MinSweep { // forces sweeps; "k" is full and forgotten
			l.For(fmt.Sprint(i))
		}
		start := time.Now()
		old.WaitN(t.Context(), 1)        // takes the token of the new bucket
		l.For("k").WaitN(t.Context(), 1) // so this one waits a full second
		if got, want := time.Since(start), time.Second; got != want {
			t.Errorf("waits through an old and a new handle took %v; want %v", got, want)
		}
	})
}

// TestSetRateBoundedByMaxKeys: SetRate on many keys remembers at most
// MaxKeys of them (a rate set lasts while its key is remembered), and a
// key forgotten past MaxKeys gets its configured rate back; a key whose
// rate was set is not forgotten for being idle.
func TestSetRateBoundedByMaxKeys(t *testing.T) {
	const maxKeys = 2000
	l := &Limiter{Limit: 10, Burst: 1, MaxKeys: maxKeys}
	for i := range 5 * maxKeys {
		if err := l.SetRate(fmt.Sprint("k", i), Rate{Limit: 1, Burst: 1}); err != nil {
			t.Fatal(err)
		}
		if n := l.Len(); n > maxKeys {
			t.Fatalf("after %d keys set, %d remembered; want ≤ %d", i+1, n, maxKeys)
		}
	}
	if got := l.State("k0").Limit; got != 10 {
		t.Errorf("a key set and forgotten past MaxKeys: limit %v; want 10 (its configured rate)", got)
	}
	last := fmt.Sprint("k", 5*maxKeys-1)
	if got := l.State(last).Limit; got != 1 {
		t.Errorf("the key set last: limit %v; want 1 (the rate set)", got)
	}
	// An idle key whose rate was set outlives the sweep of idle keys.
	m := &Limiter{Limit: 10, Burst: 1, MaxKeys: 1 << 20}
	if err := m.SetRate("set", Rate{Limit: 1, Burst: 1}); err != nil {
		t.Fatal(err)
	}
	for i := range 4 * local.MinSweep {
		m.For(fmt.Sprint("idle", i))
	}
	if got := m.State("set").Limit; got != 1 {
		t.Errorf("an idle key whose rate was set, after sweeps: limit %v; want 1", got)
	}
}
