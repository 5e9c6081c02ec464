package distributed

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// TestLimiterInFlightStoreDown: with Redis away, FailClosed refuses an
// acquisition with ErrStoreUnavailable, FailOpen admits it, and
// FailLocal caps this process at InFlight/Workers.
func TestLimiterInFlightStoreDown(t *testing.T) {
	t.Parallel()
	srv, c := startRedis(t)
	srv.Stop()
	closed := capLimiter(t, c, "down", 4)
	closed.Timeout = 50 * time.Millisecond
	if _, err := closed.For("").Acquire(context.Background(), 1); !errors.Is(err, ErrStoreUnavailable) {
		t.Errorf("FailClosed Acquire with Redis down = %v; want ErrStoreUnavailable", err)
	}
	open := capLimiter(t, c, "down", 4)
	open.FailMode, open.Timeout = FailOpen, 50*time.Millisecond
	for range 10 {
		if _, err := open.For("").Acquire(context.Background(), 4); err != nil {
			t.Fatalf("FailOpen Acquire with Redis down = %v; want nil", err)
		}
	}
	local := capLimiter(t, c, "down", 4)
	local.FailMode, local.Workers, local.Timeout = FailLocal, 2, 50*time.Millisecond
	r1, err1 := local.For("").Acquire(context.Background(), 1)
	r2, err2 := local.For("").Acquire(context.Background(), 1)
	if err1 != nil || err2 != nil {
		t.Fatalf("FailLocal Acquire = %v, %v; want nil (2 of 4 ÷ 2 workers)", err1, err2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := local.For("").Acquire(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a third FailLocal Acquire under 4 ÷ 2 workers = %v; want DeadlineExceeded", err)
	}
	r1()
	r2()
}

// TestLimiterInFlightDeadWaiter: an acquisition whose process died while
// it waited (it never asks again) blocks the queue for at most LeaseTTL:
// its place expires, or, granted meanwhile, its lease does.
func TestLimiterInFlightDeadWaiter(t *testing.T) {
	t.Parallel()
	const ttl = 400 * time.Millisecond
	for _, tc := range []struct {
		name string
		hold time.Duration // how long the holder keeps the unit
		max  time.Duration // when the live waiter must have it, at the latest
	}{
		// The dead one's place expires while the unit is held: the
		// release goes to the live waiter.
		{"place expires", 3 * ttl, 3*ttl + 100*time.Millisecond},
		// Released at once: the dead one is granted, its lease expires.
		{"lease expires", 0, ttl + 100*time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, c := startRedis(t)
			q := capLimiter(t, c, "dead", 1)
			q.LeaseTTL = ttl
			w := q.For("k").(*keyWaiter)
			start := time.Now()
			release := mustAcquireQ(t, q, "k", 1)
			// A waiter of another process queues, and dies.
			if r, err := w.lease(context.Background(), "acquire", "1:dead.1"); err != nil || r.status != leaseWaiting {
				t.Fatalf("dead waiter's acquire = %+v, %v; want waiting", r, err)
			}
			got := make(chan time.Duration, 1)
			var wg sync.WaitGroup
			defer wg.Wait()
			wg.Go(func() {
				r, err := w.Acquire(context.Background(), 1)
				if err != nil {
					t.Errorf("Acquire = %v", err)
					got <- 0
					return
				}
				got <- time.Since(start)
				r()
			})
			time.Sleep(tc.hold)
			release()
			d := <-got
			t.Logf("the live waiter got the unit after %v (held %v, LeaseTTL %v)", d, tc.hold, ttl)
			if d < tc.hold || d > tc.max {
				t.Errorf("the live waiter got the unit after %v; want within [%v, %v]", d, tc.hold, tc.max)
			}
		})
	}
}

// TestLimiterInFlightStateLost: Redis loses the leases (FLUSHALL, as a
// restart without persistence would); the holder's next renewal writes
// its lease again, so that a unit still in flight counts against the cap
// again, and a release is not undone by a renewal.
func TestLimiterInFlightStateLost(t *testing.T) {
	const ttl = 300 * time.Millisecond
	srv, c1 := startRedis(t)
	q1 := capLimiter(t, c1, "lost", 1)
	q2 := capLimiter(t, newClient(t, srv.Addr()), "lost", 1)
	q1.LeaseTTL, q2.LeaseTTL = ttl, ttl
	release := mustAcquireQ(t, q1, "k", 1)
	if err := c1.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(ttl/3 + 100*time.Millisecond) // a renewal
	if h := heldUnits(t, c1, q1, "k"); h != 1 {
		t.Errorf("held %d in Redis a renewal after the leases were lost; want 1", h)
	}
	ctx, cancel := context.WithTimeout(context.Background(), ttl)
	defer cancel()
	if _, err := q2.For("k").Acquire(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Acquire under a cap of 1 whose unit is in flight, its lease written again = %v; want DeadlineExceeded", err)
	}
	release()
	time.Sleep(ttl) // renewals past the release
	if h := heldUnits(t, c1, q1, "k"); h != 0 {
		t.Errorf("held %d after the release; want 0", h)
	}
	mustAcquireQ(t, q2, "k", 1)()
}
