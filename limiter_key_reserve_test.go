package throttle

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func reserve(t *testing.T, l *Limiter, n int) Reservation {
	t.Helper()
	r, err := l.For("k").ReserveN(t.Context(), n)
	if err != nil {
		t.Fatalf("ReserveN(%d): %v", n, err)
	}
	return r
}

// TestReserve: reservations get the turns waits would, a cancelled one's
// units go to the next in line, and Wait sleeps exactly until the turn.
func TestReserve(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limits: []Limit{{Rate: 10, Burst: 1}}}
		r0, r1, r2 := reserve(t, l, 1), reserve(t, l, 1), reserve(t, l, 1)
		for i, tt := range []struct {
			r    Reservation
			want time.Duration
		}{{r0, 0}, {r1, 100 * time.Millisecond}, {r2, 200 * time.Millisecond}} {
			if got := tt.r.Delay(); got != tt.want {
				t.Errorf("reservation %d: Delay() = %v; want %v", i, got, tt.want)
			}
		}
		r1.Cancel()
		if got := r2.Delay(); got != 100*time.Millisecond {
			t.Errorf("after the one ahead was cancelled: Delay() = %v; want 100ms", got)
		}
		if got := r1.Delay(); got != 0 {
			t.Errorf("cancelled: Delay() = %v; want 0", got)
		}
		start := time.Now()
		if err := r2.Wait(t.Context()); err != nil || time.Since(start) != 100*time.Millisecond {
			t.Errorf("Wait: %v after %v; want nil after 100ms", err, time.Since(start))
		}
		r2.Cancel() // after its turn: nothing comes back
		if st := keyState(l, "k"); st.Next != 100*time.Millisecond {
			t.Errorf("Cancel after the turn gave units back: next turn in %v; want 100ms", st.Next)
		}
		if err := r1.Wait(t.Context()); !errors.Is(err, context.Canceled) {
			t.Errorf("Wait on a cancelled reservation: %v; want context.Canceled", err)
		}
	})
}

// TestReserveCancelOnce: a second Cancel of a reservation whose ticket
// numbers were given out again does not cancel the new one.
func TestReserveCancelOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limits: []Limit{{Rate: 10, Burst: 1}}}
		reserve(t, l, 1)
		old := reserve(t, l, 1) // the tail: its numbers are taken back
		old.Cancel()
		fresh := reserve(t, l, 1)
		old.Cancel()
		if got := fresh.Delay(); got != 100*time.Millisecond {
			t.Errorf("a reservation after another's second Cancel: Delay() = %v; want 100ms", got)
		}
		if st := keyState(l, "k"); st.Queued != 1 {
			t.Errorf("queued %d; want 1", st.Queued)
		}
	})
}

// TestReserveDeadline: a turn past ctx's deadline reserves nothing; a
// Wait whose ctx ends gives the units back; a Cancel while Wait sleeps
// ends it.
func TestReserveDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limits: []Limit{{Rate: 10, Burst: 1}}}
		reserve(t, l, 1)
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		if _, err := l.For("k").ReserveN(ctx, 1); !errors.Is(err, ErrWouldExceedDeadline) {
			t.Errorf("ReserveN past the deadline: %v; want ErrWouldExceedDeadline", err)
		}
		r := reserve(t, l, 1) // 100ms: nothing was kept by the refused one
		if got := r.Delay(); got != 100*time.Millisecond {
			t.Errorf("Delay() = %v; want 100ms", got)
		}
		ctx2, cancel2 := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := r.Wait(ctx2); !errors.Is(err, context.Canceled) {
				t.Errorf("Wait with ctx cancelled: %v", err)
			}
		})
		synctest.Wait()
		cancel2()
		wg.Wait()
		if got := reserve(t, l, 1).Delay(); got != 100*time.Millisecond {
			t.Errorf("after a Wait cancelled: next reservation's Delay() = %v; want 100ms", got)
		}
		r3 := reserve(t, l, 1)
		wg.Go(func() {
			if err := r3.Wait(t.Context()); !errors.Is(err, context.Canceled) {
				t.Errorf("Wait ended by Cancel: %v; want context.Canceled", err)
			}
		})
		synctest.Wait()
		r3.Cancel()
		wg.Wait()
		if st := keyState(l, "k"); st.Queued != 1 {
			t.Errorf("queued %d after the cancels; want 1", st.Queued)
		}
	})
}
