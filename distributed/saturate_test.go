package distributed

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/throttle-go/throttle"
	"golang.org/x/time/rate"
)

// TestFarTurnSaturates: turns past the largest time.Duration (292 years)
// are never, as for the in-process Limiter, never a wait that overflowed
// into the past. At 1e-10/s (a unit per 317 years, a reply of integers)
// and 1e-300/s (the fast path's packed doubles, far past int64), burst
// 1, through leased turns and without: the first unit goes, then Try
// refuses with the largest Duration, State's next turn is the largest
// Duration, 40 waits with a deadline fail at once with
// ErrWouldExceedDeadline, and 40 without one sleep until their context
// ends (none goes).
func TestFarTurnSaturates(t *testing.T) {
	_, c := startRedis(t)
	for _, limit := range []rate.Limit{1e-10, 1e-300} {
		for _, lease := range []int{1, 0} {
			t.Run(fmt.Sprintf("%g/s,MaxLease=%d", limit, lease), func(t *testing.T) {
				q := New(c, fmt.Sprintf("far-%g-%d", limit, lease), throttle.Limit{Rate: limit, Burst: 1})
				q.MaxLease = lease
				q.Timeout = time.Second
				defer q.Close()
				w := q.For("k").(*keyWaiter)
				if err := w.WaitN(context.Background(), 1); err != nil {
					t.Fatalf("first WaitN(1) = %v", err)
				}
				never(t, w)
			})
		}
	}
}

// TestHugeSettleSaturates: at 1e-10/s, burst 2, one unit spent leaves
// one; a settle of that unit as 1e11 is bounded by the burst (a debt of
// 2: the next unit is two intervals, 634 years, away) and reports the
// rest dropped; then no wait goes early, and Try's delay is the largest
// Duration, not a negative one.
func TestHugeSettleSaturates(t *testing.T) {
	_, c := startRedis(t)
	q := New(c, "huge-settle", throttle.Limit{Rate: 1e-10, Burst: 2})
	q.MaxLease = 1
	q.Timeout = time.Second
	defer q.Close()
	w := q.For("k").(*keyWaiter)
	ctx := context.Background()
	if err := w.WaitN(ctx, 1); err != nil {
		t.Fatalf("first WaitN(1) = %v", err)
	}
	dropped, err := w.settle(ctx, throttle.Cost{N: 1}, throttle.Cost{N: 1e11})
	if want := []int64{1e11 - 1 - 2}; err != nil || len(dropped) != 1 || dropped[0] != want[0] {
		t.Fatalf("settle(1, 1e11) = %v, %v; want %v dropped", dropped, err, want)
	}
	never(t, w)
}

// never checks that w's next unit is never: Try and State say the
// largest Duration, waits with a deadline fail at once, waits without
// one sleep until their context ends.
func never(t *testing.T, w *keyWaiter) {
	t.Helper()
	ctx := context.Background()
	ok, d, err := w.Try(ctx, throttle.Cost{N: 1})
	if ok || err != nil || d != math.MaxInt64 {
		t.Errorf("Try(1) = %v, %v, %v; want false, the largest Duration", ok, d, err)
	}
	st, err := w.State(ctx)
	if err != nil || st.Next != math.MaxInt64 {
		t.Errorf("State().Next = %v, %v; want the largest Duration", st.Next, err)
	}
	const waits = 40
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	start := time.Now()
	for i := range waits {
		err := w.WaitN(dctx, 1)
		var de *throttle.DeadlineError
		if !errors.Is(err, throttle.ErrWouldExceedDeadline) || !errors.As(err, &de) || de.Delay != math.MaxInt64 {
			t.Fatalf("wait %d with a deadline = %v; want ErrWouldExceedDeadline, the largest Duration", i, err)
		}
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("%d waits with a deadline took %v; want each refused at once", waits, d)
	}
	// Without a deadline: each sleeps on its ticket until ctx ends.
	cctx, stop := context.WithCancel(ctx)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for range waits {
		wg.Go(func() {
			err := w.WaitN(cctx, 1)
			mu.Lock()
			defer mu.Unlock()
			errs = append(errs, err)
		})
	}
	// Every wait holds its ticket in Redis before ctx ends (asked, at
	// most every 10ms, for up to 10 s).
	for end := time.Now().Add(10 * time.Second); ; {
		st, err := w.State(ctx)
		mu.Lock()
		gone := len(errs)
		mu.Unlock()
		if gone > 0 {
			break // some went: reported below
		}
		if err == nil && st.Queued >= waits {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("State().Queued = %d, %v after 10 s; want %d waits queued", st.Queued, err, waits)
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("wait %d without a deadline = %v; want context.Canceled (it sleeps until ctx ends)", i, err)
		}
	}
}
