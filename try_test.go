package throttle

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func trier(l *Limiter, key string) Trier { return l.For(key).(Trier) }

// TestTryN checks TryN against the turns a wait would get: a try goes
// exactly when a wait would go at once, and otherwise reports that
// wait's turn and changes nothing.
func TestTryN(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limit: 10, Burst: 3}
		k := trier(l, "k")
		for i := range 3 {
			if ok, d, err := k.TryN(t.Context(), 1); !ok || d != 0 || err != nil {
				t.Fatalf("try %d of a full bucket of 3 = %v, %v, %v; want true, 0, nil", i, ok, d, err)
			}
		}
		before := l.State("k")
		for range 5 { // refused tries change nothing
			if ok, d, err := k.TryN(t.Context(), 2); ok || d != 200*time.Millisecond || err != nil {
				t.Fatalf("TryN(2) of an empty bucket at 10/s = %v, %v, %v; want false, 200ms, nil", ok, d, err)
			}
		}
		if after := l.State("k"); after != before {
			t.Errorf("refused tries changed the state: %+v, was %+v", after, before)
		}
		start := time.Now()
		if err := l.For("k").WaitN(t.Context(), 1); err != nil || time.Since(start) != 100*time.Millisecond {
			t.Fatalf("a wait after refused tries: %v after %v; want nil after 100ms", err, time.Since(start))
		}
		// A wait queued ahead: a try behind it goes no earlier.
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := l.For("k").WaitN(context.Background(), 1); err != nil {
				t.Errorf("queued wait: %v", err)
			}
		})
		synctest.Wait()
		if ok, d, _ := k.TryN(t.Context(), 1); ok || d != 200*time.Millisecond {
			t.Errorf("try behind a wait queued for 100ms = %v, %v; want false, 200ms", ok, d)
		}
		wg.Wait()
		time.Sleep(100 * time.Millisecond)
		if ok, _, _ := k.TryN(t.Context(), 1); !ok {
			t.Errorf("try at its turn refused")
		}
		// A pause holds tries too.
		_ = l.For("k").(Pauser).Pause(t.Context(), time.Second)
		time.Sleep(time.Second) // the bucket is full again; the pause ends now
		if ok, d, _ := k.TryN(t.Context(), 1); !ok || d != 0 {
			t.Errorf("try at a pause's end = %v, %v; want true, 0", ok, d)
		}
		_ = l.For("k").(Pauser).Pause(t.Context(), time.Second)
		if ok, d, _ := k.TryN(t.Context(), 1); ok || d != time.Second {
			t.Errorf("try in a pause of 1s = %v, %v; want false, 1s", ok, d)
		}
	})
}

func TestTryNErrors(t *testing.T) {
	l := &Limiter{Limit: 10, Burst: 3}
	if _, _, err := trier(l, "k").TryN(t.Context(), 4); !errors.Is(err, ErrCostExceedsBurst) {
		t.Errorf("TryN(4) of burst 3: %v; want ErrCostExceedsBurst", err)
	}
	if _, _, err := trier(l, "k").TryN(t.Context(), -1); !errors.Is(err, ErrInvalidLimit) {
		t.Errorf("TryN(-1): %v; want ErrInvalidLimit", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if ok, _, err := trier(l, "k").TryN(ctx, 1); ok || !errors.Is(err, context.Canceled) {
		t.Errorf("TryN with an ended ctx = %v, %v; want false, context.Canceled", ok, err)
	}
	if ok, _, err := trier(l, "k").TryN(t.Context(), 0); !ok || err != nil {
		t.Errorf("TryN(0) = %v, %v; want true, nil", ok, err)
	}
	unlimited := &Limiter{}
	for range 1000 {
		if !unlimited.Allow() {
			t.Fatal("Allow on a Limiter without a limit refused")
		}
	}
}

// TestTryNConcurrent: a bucket of 50, 200 concurrent non-blocking
// callers: exactly 50 go (the seed table).
func TestTryNConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limit: 1, Burst: 50}
		var ok atomic.Int32
		var wg sync.WaitGroup
		for range 200 {
			wg.Go(func() {
				if l.For("k").(Trier).(interface{ Allow() bool }).Allow() {
					ok.Add(1)
				}
			})
		}
		wg.Wait()
		if ok.Load() != 50 {
			t.Errorf("200 tries on a bucket of 50: %d went; want 50", ok.Load())
		}
	})
}

// TestTryNWindow: a server's window binds a try as it binds a wait.
func TestTryNWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limit: 100, Burst: 100}
		k := l.For("k")
		_ = k.(Adapter).Adapt(t.Context(), Feedback{HasRemaining: true, Remaining: 2, Size: 100, Reset: 10 * time.Second})
		went := 0
		for range 5 {
			if ok, _, _ := k.(Trier).TryN(t.Context(), 1); ok {
				went++
			}
		}
		_, d, _ := k.(Trier).TryN(t.Context(), 1)
		// Two units left, spread to the reset: one at once, one at 5s.
		if went != 1 || d != 5*time.Second {
			t.Errorf("tries under a window of 2 left for 10s: %d went, next in %v; want 1, 5s", went, d)
		}
	})
}
