package distributed

import (
	"context"
	"errors"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/throttle-go/throttle"
	"golang.org/x/time/rate"
)

// TestWaitLocal checks the FailLocal wait against the Waiter contract with
// a fake clock: exact sleeps, immediate refusal past the deadline with
// nothing reserved, and a refund on cancellation.
func TestWaitLocal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l localBuckets
		lim := l.get("k", 20, 2, 2, time.Now()) // 10/s, starts with 1 token
		ctx := context.Background()

		start := time.Now()
		if err := waitLocal(ctx, lim, "k", 1, time.Now, new(memos), "k"); err != nil || time.Since(start) != 0 {
			t.Fatalf("first wait = %v after %v; want nil at once (the local share)", err, time.Since(start))
		}

		dctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		err := waitLocal(dctx, lim, "k", 1, time.Now, new(memos), "k")
		var de *throttle.DeadlineError
		if !errors.As(err, &de) || !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 0 {
			t.Fatalf("wait past the deadline = %v after %v; want a DeadlineError at once", err, time.Since(start))
		}
		if de.Delay != 100*time.Millisecond {
			t.Errorf("DeadlineError.Delay = %v; want 100ms", de.Delay)
		}

		if err := waitLocal(ctx, lim, "k", 1, time.Now, new(memos), "k"); err != nil || time.Since(start) != 100*time.Millisecond {
			t.Fatalf("next wait = %v after %v; want nil after exactly 100ms (the refused wait reserved nothing)", err, time.Since(start))
		}

		cctx, cancel2 := context.WithTimeout(ctx, 30*time.Millisecond)
		defer cancel2()
		// A deadline-free cancel: wrap so waitLocal sees no deadline.
		nctx, ncancel := context.WithCancel(context.WithoutCancel(cctx))
		stop := context.AfterFunc(cctx, ncancel)
		defer stop()
		if err := waitLocal(nctx, lim, "k", 1, time.Now, new(memos), "k"); !errors.Is(err, context.Canceled) || time.Since(start) != 130*time.Millisecond {
			t.Fatalf("cancelled wait = %v after %v; want Canceled after 30ms more", err, time.Since(start))
		}
		// 30ms of refill at 10/s since the bucket was empty: 0.3 tokens
		// with the unit given back, -0.7 without.
		if got := lim.TokensAt(time.Now()); math.Abs(got-0.3) > 1e-9 {
			t.Errorf("tokens after the cancelled wait = %v; want 0.3 (its unit given back)", got)
		}
	})
}

// TestWaitLocalFollowsMovedTurn: a FailLocal wait takes no turn before
// the last one Redis gave its process, and that turn is the last
// ticket's as last learned: when Redis moves it earlier (a learned
// budget's window that rolled: the queue past it had turns a probe a
// second apart), the wait goes then, not at the turn first told; a
// refused wait's turn (nothing kept) bounds nothing; an earlier ticket's
// turn moves the bound later only.
func TestWaitLocalFollowsMovedTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l localBuckets
		lim := l.get("k", 100, 10, 1, time.Now())
		var m memos
		const id = 7
		start := time.Now()
		m.state("k", id) // a refused wait: nothing kept, no bound
		if nb := m.notBefore("k"); !nb.IsZero() {
			t.Fatalf("bound after a refused wait = %v; want none", nb.Sub(start))
		}
		m.ticket("k", id, queueFirst, 10, start.Add(30*time.Second)) // the last ticket, past a spent window
		m.ticket("k", id, queueFirst, 9, start.Add(29*time.Second))  // an earlier one: no change
		done := make(chan error, 1)
		go func() { done <- waitLocal(context.Background(), lim, "k", 1, time.Now, &m, "k") }()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("FailLocal wait returned %v after %v; want it held by the last turn, 30s", err, time.Since(start))
		default:
		}
		// The window rolled: the last ticket's turn is now 100ms away.
		m.ticket("k", id, queueFirst, 10, time.Now().Add(100*time.Millisecond))
		if err := <-done; err != nil || time.Since(start) != 2100*time.Millisecond {
			t.Fatalf("FailLocal wait = %v after %v; want nil after 2.1s (the moved turn)", err, time.Since(start))
		}
		// An earlier ticket's turn past the bound moves it later.
		m.ticket("k", id, queueFirst, 5, time.Now().Add(time.Second))
		if nb := m.notBefore("k"); nb.Sub(time.Now()) != time.Second {
			t.Errorf("bound after an earlier ticket's later turn = %v from now; want 1s", nb.Sub(time.Now()))
		}
	})
}

// TestLocalRateIsShare: FailLocal paces at rate ÷ workers.
func TestLocalRateIsShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l localBuckets
		lim := l.get("k", rate.Limit(100), 10, 4, time.Now()) // 25/s, 3 tokens
		start := time.Now()
		for range 3 + 25 {
			if err := waitLocal(context.Background(), lim, "k", 1, time.Now, new(memos), "k"); err != nil {
				t.Fatal(err)
			}
		}
		if got := time.Since(start); got != time.Second {
			t.Errorf("3 + 25 local waits took %v; want 1s at 25/s", got)
		}
	})
}
