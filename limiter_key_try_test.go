package throttle

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestTry checks Try against the turns a wait would get: a try goes
// exactly when a wait would go at once, and otherwise reports that
// wait's turn and changes nothing.
func TestTry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limits: []Limit{{Rate: 10, Burst: 3}}}
		k := l.For("k")
		for i := range 3 {
			if ok, d, err := k.Try(t.Context(), Cost{N: 1}); !ok || d != 0 || err != nil {
				t.Fatalf("try %d of a full bucket of 3 = %v, %v, %v; want true, 0, nil", i, ok, d, err)
			}
		}
		before := keyState(l, "k")
		for range 5 { // refused tries change nothing
			if ok, d, err := k.Try(t.Context(), Cost{N: 2}); ok || d != 200*time.Millisecond || err != nil {
				t.Fatalf("Try(2) of an empty bucket at 10/s = %v, %v, %v; want false, 200ms, nil", ok, d, err)
			}
		}
		if after := keyState(l, "k"); !reflect.DeepEqual(after, before) {
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
		if ok, d, _ := k.Try(t.Context(), Cost{N: 1}); ok || d != 200*time.Millisecond {
			t.Errorf("try behind a wait queued for 100ms = %v, %v; want false, 200ms", ok, d)
		}
		wg.Wait()
		time.Sleep(100 * time.Millisecond)
		if ok, _, _ := k.Try(t.Context(), Cost{N: 1}); !ok {
			t.Errorf("try at its turn refused")
		}
		// A pause holds tries too.
		_ = l.For("k").Pause(t.Context(), time.Second)
		time.Sleep(time.Second) // the bucket is full again; the pause ends now
		if ok, d, _ := k.Try(t.Context(), Cost{N: 1}); !ok || d != 0 {
			t.Errorf("try at a pause's end = %v, %v; want true, 0", ok, d)
		}
		_ = l.For("k").Pause(t.Context(), time.Second)
		if ok, d, _ := k.Try(t.Context(), Cost{N: 1}); ok || d != time.Second {
			t.Errorf("try in a pause of 1s = %v, %v; want false, 1s", ok, d)
		}
	})
}

func TestTryErrors(t *testing.T) {
	l := &Limiter{Limits: []Limit{{Rate: 10, Burst: 3}}}
	if _, _, err := l.For("k").Try(t.Context(), Cost{N: 4}); !errors.Is(err, ErrCostExceedsBurst) {
		t.Errorf("Try(4) of burst 3: %v; want ErrCostExceedsBurst", err)
	}
	if _, _, err := l.For("k").Try(t.Context(), Cost{N: -1}); !errors.Is(err, ErrInvalidLimit) {
		t.Errorf("Try(-1): %v; want ErrInvalidLimit", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if ok, _, err := l.For("k").Try(ctx, Cost{N: 1}); ok || !errors.Is(err, context.Canceled) {
		t.Errorf("Try with an ended ctx = %v, %v; want false, context.Canceled", ok, err)
	}
	if !l.For("k").AllowN(0) {
		t.Errorf("AllowN(0) = false; want true")
	}
	unlimited := &Limiter{}
	for range 1000 {
		if !unlimited.For("").Allow() {
			t.Fatal("Allow on a Limiter without a limit refused")
		}
	}
}

// TestTryConcurrent: a bucket of 50, 200 concurrent non-blocking
// callers: exactly 50 go (the seed table).
func TestTryConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limits: []Limit{{Rate: 1, Burst: 50}}}
		var ok atomic.Int32
		var wg sync.WaitGroup
		for range 200 {
			wg.Go(func() {
				if l.For("k").Allow() {
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

// TestTryWindow: a server's window binds a try as it binds a wait.
func TestTryWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limits: []Limit{{Rate: 100, Burst: 100}}}
		k := l.For("k")
		_, _ = k.Observe(t.Context(), Feedback{Window: &ServerWindow{Remaining: 2, Reset: 10 * time.Second, Size: 100}})
		went := 0
		for range 5 {
			if ok, _, _ := k.Try(t.Context(), Cost{N: 1}); ok {
				went++
			}
		}
		_, d, _ := k.Try(t.Context(), Cost{N: 1})
		// Two units left, spread to the reset: one at once, one at 5s.
		if went != 1 || d != 5*time.Second {
			t.Errorf("tries under a window of 2 left for 10s: %d went, next in %v; want 1, 5s", went, d)
		}
	})
}
