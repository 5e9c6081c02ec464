package throttle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestWindowSpentWaitsInOrder: waits blocked on a spent server window go
// in arrival order after its reset, one probe a second until a response
// tells the next window, so the 7th arrival waits its FIFO time, 6 s past
// the reset.
func TestWindowSpentWaitsInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limits: []Limit{{Rate: 100, Burst: 10}}}
		b := l.For("k")
		start := time.Now()
		b.Observe(t.Context(), Feedback{Window: &ServerWindow{Remaining: 0, Reset: time.Second, Size: 100, Length: time.Minute}})
		var mu sync.Mutex
		var order []int
		ends := make([]time.Duration, 20)
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Go(func() {
				if err := b.WaitN(t.Context(), 1); err != nil {
					t.Error(err)
				}
				mu.Lock()
				order = append(order, i)
				ends[i] = time.Since(start)
				mu.Unlock()
			})
			synctest.Wait()
		}
		wg.Wait()
		if !slices.IsSorted(order) {
			t.Errorf("admission order %v; want arrival order", order)
		}
		// The reset at 1 s, then one probe a second.
		if got, want := ends[6], 7*time.Second; got != want {
			t.Errorf("7th arrival went at %v; want %v (reset + 6 probes)", got, want)
		}
		t.Logf("order %v; ends %v", order, ends)
	})
}

// TestCancelledTurnGoesToOneWait: burst 1, 10/s; A goes at 0, B (turn
// 100 ms) and C (turn 200 ms) wait, B is cancelled at 10 ms, D arrives at
// 20 ms: C moves up to 100 ms and D takes 200 ms; never two at once.
func TestCancelledTurnGoesToOneWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limits: []Limit{{Rate: 10, Burst: 1}}}
		k := l.For("k")
		start := time.Now()
		var mu sync.Mutex
		ends := map[string]time.Duration{}
		var wg sync.WaitGroup
		wait := func(name string, ctx context.Context) {
			wg.Go(func() {
				err := k.WaitN(ctx, 1)
				mu.Lock()
				defer mu.Unlock()
				if err == nil {
					ends[name] = time.Since(start)
				}
			})
			synctest.Wait()
		}
		wait("A", t.Context())
		ctxB, cancelB := context.WithCancel(t.Context())
		wait("B", ctxB)
		wait("C", t.Context())
		time.Sleep(10 * time.Millisecond)
		cancelB()
		time.Sleep(10 * time.Millisecond)
		wait("D", t.Context())
		wg.Wait()
		want := map[string]time.Duration{"A": 0, "C": 100 * time.Millisecond, "D": 200 * time.Millisecond}
		if fmt.Sprint(ends) != fmt.Sprint(want) {
			t.Errorf("waits went at %v; want %v", ends, want)
		}
	})
}

// TestVerySlowRate: at 1e-10 units a second (one per 317 years) a second
// wait with a deadline fails at once with ErrWouldExceedDeadline (its
// delay does not overflow time.Duration), and one without a deadline
// blocks until its context ends.
func TestVerySlowRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limits: []Limit{{Rate: 1e-10, Burst: 1}}}
		k := l.For("k")
		if err := k.WaitN(t.Context(), 1); err != nil { // the full bucket's unit
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
		defer cancel()
		start := time.Now()
		if err := k.WaitN(ctx, 1); !errors.Is(err, ErrWouldExceedDeadline) || time.Since(start) != 0 {
			t.Errorf("wait with a 1-h deadline = %v after %v; want ErrWouldExceedDeadline at once", err, time.Since(start))
		}
		ctx, cancel = context.WithCancel(t.Context())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- k.WaitN(ctx, 1) }()
		time.Sleep(24 * time.Hour)
		synctest.Wait()
		select {
		case err := <-done:
			t.Errorf("wait without a deadline returned %v after %v; want it blocked", err, time.Since(start))
			return
		default:
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled wait = %v; want context.Canceled", err)
		}
	})
}
