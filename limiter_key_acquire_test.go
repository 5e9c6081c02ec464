package throttle

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// mustAcquire acquires n units of a at once, or fails the test.
func mustAcquire(t *testing.T, a Quota, n int) func() {
	t.Helper()
	release, err := a.Acquire(t.Context(), n)
	if err != nil {
		t.Fatalf("Acquire(%d) = %v", n, err)
	}
	return release
}

// TestAcquireFIFO: acquisitions are served in arrival order, at the
// instant the units they need are released; a large one at the head is
// not overtaken by a small one that would fit.
func TestAcquireFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{InFlight: 3}
		a := l.For("k")
		start := time.Now()
		r1 := mustAcquire(t, a, 2)
		r2 := mustAcquire(t, a, 1)

		var (
			mu    sync.Mutex
			order = map[string]time.Duration{} // when each was granted
			wg    sync.WaitGroup
			rels  = map[string]func(){}
		)
		for _, w := range []struct {
			name string
			n    int
		}{{"A2", 2}, {"B1", 1}, {"C3", 3}, {"D1", 1}} {
			wg.Go(func() {
				release, err := a.Acquire(context.Background(), w.n)
				if err != nil {
					t.Errorf("%s: Acquire = %v", w.name, err)
					return
				}
				mu.Lock()
				order[w.name] = time.Since(start)
				rels[w.name] = release
				mu.Unlock()
			})
			synctest.Wait() // arrivals in this order
		}
		time.Sleep(time.Second)
		r2() // 1 free: A2 needs 2 and blocks B1 behind it
		synctest.Wait()
		mu.Lock()
		if len(order) != 0 {
			t.Fatalf("granted %v with 1 unit free and A2 (2) at the head; want none", order)
		}
		mu.Unlock()
		// A newcomer does not take the free unit ahead of them either.
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		if _, err := a.Acquire(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Acquire(1) arriving with 1 unit free behind A2 = %v; want DeadlineExceeded", err)
		}
		cancel()
		time.Sleep(500 * time.Millisecond)
		r1() // 3 free: A2 and B1
		synctest.Wait()
		time.Sleep(time.Second)
		mu.Lock()
		rels["A2"]()
		rels["B1"]() // 3 free: C3
		mu.Unlock()
		synctest.Wait()
		time.Sleep(time.Second)
		mu.Lock()
		rels["C3"]() // D1
		mu.Unlock()
		wg.Wait()
		want := map[string]time.Duration{"A2": 2 * time.Second, "B1": 2 * time.Second, "C3": 3 * time.Second, "D1": 4 * time.Second}
		if !maps.Equal(order, want) {
			t.Errorf("granted %v; want %v", order, want)
		}
		rels["D1"]()
		if h := l.key("k").k().Held(); h != 0 {
			t.Errorf("held %d after every release; want 0", h)
		}
	})
}

// TestAcquireDeadline: an acquisition whose ctx's deadline passes first
// returns ctx's error at the deadline, holds nothing, and the one behind
// it moves up at once.
func TestAcquireDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{InFlight: 2}
		a := l.For("k")
		start := time.Now()
		hold := mustAcquire(t, a, 1)
		var wg sync.WaitGroup
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_, err := a.Acquire(ctx, 2) // the head: needs both
			if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != time.Second {
				t.Errorf("Acquire(2) past its deadline = %v after %v; want DeadlineExceeded after 1s", err, time.Since(start))
			}
		})
		synctest.Wait()
		var behind time.Duration
		wg.Go(func() {
			release, err := a.Acquire(context.Background(), 1)
			if err != nil {
				t.Errorf("Acquire(1) behind = %v", err)
				return
			}
			behind = time.Since(start)
			release()
		})
		wg.Wait()
		if behind != time.Second {
			t.Errorf("the acquisition behind went after %v; want 1s (when the head's deadline passed)", behind)
		}
		hold()
		if h := l.key("k").k().Held(); h != 0 {
			t.Errorf("held %d; want 0", h)
		}
	})
}

// TestAcquireCancel: a cancelled acquisition returns at once with
// ctx's error, and the units it waited for go to the next in line.
func TestAcquireCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{InFlight: 1}
		a := l.For("k")
		hold := mustAcquire(t, a, 1)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() {
			if _, err := a.Acquire(ctx, 1); !errors.Is(err, context.Canceled) {
				t.Errorf("cancelled Acquire = %v; want context.Canceled", err)
			}
		})
		synctest.Wait()
		got := make(chan time.Duration, 1)
		start := time.Now()
		wg.Go(func() {
			release, err := a.Acquire(context.Background(), 1)
			if err != nil {
				t.Errorf("Acquire = %v", err)
				return
			}
			got <- time.Since(start)
			release()
		})
		synctest.Wait()
		time.Sleep(time.Second)
		cancel()
		synctest.Wait()
		time.Sleep(time.Second)
		hold()
		if d := <-got; d != 2*time.Second {
			t.Errorf("the second went after %v; want 2s (at the release, the cancelled one holding nothing)", d)
		}
		wg.Wait()
		if _, err := a.Acquire(ctx, 1); !errors.Is(err, context.Canceled) {
			t.Errorf("Acquire with an ended ctx = %v; want context.Canceled", err)
		}
	})
}

// TestReleaseOnce: a second release does nothing; it never frees units
// another acquisition holds.
func TestReleaseOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{InFlight: 2}
		a := l.For("k")
		r1 := mustAcquire(t, a, 1)
		r2 := mustAcquire(t, a, 1)
		r1()
		r1()
		r1()
		r3 := mustAcquire(t, a, 1) // the one r1 freed
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := a.Acquire(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("a third unit under a cap of 2, after a release called three times = %v; want DeadlineExceeded", err)
		}
		r2()
		r3()
		if h := l.key("k").k().Held(); h != 0 {
			t.Errorf("held %d; want 0", h)
		}
	})
}

// TestAcquireLimits: the cost checks, a key without a cap, overrides.
func TestAcquireLimits(t *testing.T) {
	l := &Limiter{InFlight: 2, InFlightOverrides: map[string]int{"one": 1, "free": 0}}
	ctx := context.Background()
	if _, err := l.For("k").Acquire(ctx, 3); !errors.Is(err, ErrCostExceedsBurst) {
		t.Errorf("Acquire(3) under a cap of 2 = %v; want ErrCostExceedsBurst", err)
	}
	if _, err := l.For("one").Acquire(ctx, 2); !errors.Is(err, ErrCostExceedsBurst) {
		t.Errorf("Acquire(2) under an override of 1 = %v; want ErrCostExceedsBurst", err)
	}
	if _, err := l.For("k").Acquire(ctx, -1); !errors.Is(err, ErrInvalidLimit) {
		t.Errorf("Acquire(-1) = %v; want ErrInvalidLimit", err)
	}
	for range 1000 { // no cap: never blocks, nothing held
		if _, err := l.For("free").Acquire(ctx, 1000); err != nil {
			t.Fatalf("Acquire on a key without a cap = %v", err)
		}
	}
	var zero Limiter
	if _, err := zero.For("").Acquire(ctx, 1<<30); err != nil {
		t.Errorf("Acquire on the zero Limiter = %v; want nil (no cap)", err)
	}
}

// TestInFlightNotIdle: a key with units in flight is not forgotten by a
// sweep, and the Limiter remembers at most MaxKeys keys.
func TestInFlightNotIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{InFlight: 1, MaxKeys: 8}
		release := mustAcquire(t, l.For("held"), 1)
		for i := range 100 {
			r := mustAcquire(t, l.For(fmt.Sprint(i)), 1)
			r()
			if n := l.Len(); n > 8 {
				t.Fatalf("Len = %d after %d keys; want ≤ MaxKeys 8", n, i+2)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if r, err := l.For("held").Acquire(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("a second unit of a key with its one slot held, after 100 other keys = %v; want DeadlineExceeded (the key was forgotten)", err)
			if err == nil {
				r()
			}
		}
		release()
		mustAcquire(t, l.For("held"), 1)()
	})
}
