package distributed

import (
	"context"
	"errors"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/throttle-go/throttle"
)

// turnRecorder collects the turns (µs of Redis's clock) of waits.
type turnRecorder struct {
	mu    sync.Mutex
	turns []int64
}

func (r *turnRecorder) add(turn int64) {
	r.mu.Lock()
	r.turns = append(r.turns, turn)
	r.mu.Unlock()
}

func (r *turnRecorder) sorted() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(slices.Values(r.turns))
}

// TestWindowFleet: two workers (two Limiters, two clients, one Redis) share
// a key. One of them learns a window of 5 units left until a reset 2 s
// away (size 10, so 5 left is not low and nothing spreads). Together, 8
// goroutines get exactly 5 turns before the reset, all at once; then the
// first wait after the reset goes alone as a probe; its response tells a
// new window of 3, and exactly 3 more turns follow. The run ends 1.5 s
// after the reset, before the second window's reset, so the count is
// exact: 5 + 1 + 3.
func TestWindowFleet(t *testing.T) {
	t.Parallel()
	s, c1 := startRedis(t)
	c2 := newClient(t, s.Addr())
	q1, q2 := New(c1, "window-fleet", throttle.Limit{Rate: 1000, Burst: 10}), New(c2, "window-fleet", throttle.Limit{Rate: 1000, Burst: 10})
	q1.Timeout, q2.Timeout = time.Second, time.Second // a busy machine is no outage
	w1, w2 := q1.For("api").(*keyWaiter), q2.For("api").(*keyWaiter)
	ctx := context.Background()
	win := func(left float64) throttle.Feedback {
		return throttle.Feedback{Window: &throttle.ServerWindow{Remaining: left, Reset: 2 * time.Second, Size: 10, Length: 2 * time.Second}}
	}
	before := redisNow(t, c1)
	if _, err := w1.Observe(ctx, win(5)); err != nil {
		t.Fatalf("Observe = %v", err)
	}
	after := redisNow(t, c1)
	// The reset is Observe's TIME + 2 s: between these two.
	resetLo, resetHi := before+2e6, after+2e6

	dctx, cancel := context.WithTimeout(ctx, 3500*time.Millisecond) // the reset + 1.5 s
	defer cancel()
	var (
		rec    turnRecorder
		probed atomic.Bool
		wg     sync.WaitGroup
		errs   = make(chan error, 8)
	)
	for _, w := range []*keyWaiter{w1, w2, w1, w2, w1, w2, w1, w2} {
		wg.Go(func() {
			for {
				turn, err := w.waitN(dctx, 1)
				if errors.Is(err, throttle.ErrWouldExceedDeadline) || dctx.Err() != nil {
					return
				}
				if err != nil {
					errs <- err
					return
				}
				rec.add(turn)
				if float64(turn) >= resetLo && probed.CompareAndSwap(false, true) {
					// The probe's response: a new window, 3 left after it.
					if _, err := w.Observe(ctx, win(3)); err != nil {
						errs <- err
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("wait: %v", err)
	}
	turns := rec.sorted()
	var first, later []int64
	for _, turn := range turns {
		if float64(turn) < resetLo {
			first = append(first, turn)
		} else {
			later = append(later, turn)
		}
	}
	t.Logf("turns relative to Observe (ms): %v; reset in [%.1f, %.1f]", relMs(turns, before), (resetLo-before)/1e3, (resetHi-before)/1e3)
	if len(first) != 5 {
		t.Errorf("%d turns before the reset; want exactly 5 (the window's remaining)", len(first))
	}
	for _, turn := range first {
		// Immediate: within 200ms of Observe (scheduling of 8 goroutines
		// and their round trips on a loaded machine).
		if float64(turn)-after > 200e3 {
			t.Errorf("a turn of the first window came %.1fms after Observe; want immediate", (float64(turn)-after)/1e3)
		}
	}
	// The probe and the new window's 3, less the units gone within the
	// last second whose responses were never reported (the first
	// window's five here): a window counts them as in flight, at most
	// as many as went over the last second (the probe itself).
	if len(later) < 3 || len(later) > 4 {
		t.Errorf("%d turns after the reset; want 4 (the probe and the new window's 3), or 3 with the probe counted in flight", len(later))
	}
	if len(later) > 0 && float64(later[0]) > resetHi+300e3 {
		t.Errorf("the probe's turn came %.1fms after the reset; want within 300ms", (float64(later[0])-resetHi)/1e3)
	}
}

func relMs(turns []int64, from float64) []float64 {
	turns = turns[:min(len(turns), 20)] // enough to see what went wrong
	out := make([]float64, len(turns))
	for i, t := range turns {
		out[i] = math.Round((float64(t)-from)/100) / 10
	}
	return out
}

// TestWindowSpread: a window with 4 units left until a reset 2 s away
// runs low (under 10, its size unknown), so its units are spread to the
// reset from the moment it was told: the j-th at Adapt + (j-1)·2s/4. A
// waiter calling in a loop gets the first at once and the next ones
// exactly 500ms apart on Redis's clock (each turn follows from the state,
// not from when the caller woke). The fifth wait is past the window and
// goes at the reset as the probe.
func TestWindowSpread(t *testing.T) {
	t.Parallel()
	_, c := startRedis(t)
	q := New(c, "window-spread", throttle.Limit{Rate: 1000, Burst: 1}) // 1ms per unit: the window paces
	q.Timeout = time.Second
	w := q.For("api").(*keyWaiter)
	ctx := context.Background()
	before := redisNow(t, c)
	if _, err := w.Observe(ctx, throttle.Feedback{Window: &throttle.ServerWindow{Remaining: 4, Reset: 2 * time.Second}}); err != nil {
		t.Fatalf("Observe = %v", err)
	}
	after := redisNow(t, c)
	var turns []int64
	for range 5 {
		turn, err := w.waitN(ctx, 1)
		if err != nil {
			t.Fatalf("WaitN = %v", err)
		}
		turns = append(turns, turn)
	}
	t.Logf("turns relative to Observe (ms): %v", relMs(turns, before))
	if float64(turns[0]) > after+200e3 {
		t.Errorf("the first turn came at Adapt+%.1fms; want at once (a round trip, ≤ 200ms on a loaded machine)", (float64(turns[0])-before)/1e3)
	}
	// The spread is anchored at the Observe's TIME, between before and
	// after: turns 2-4 at anchor + 500ms·(j-1), 500ms apart to the µs
	// (each wait rounds its µs up once: 2µs of slack).
	for i := 2; i < 4; i++ {
		if d := turns[i] - turns[i-1]; d < 500e3-2 || d > 500e3+2 {
			t.Errorf("turn %d came %dµs after the one before; want 500000µs (2 s / 4)", i, d)
		}
	}
	if anchor := float64(turns[1]) - 500e3; anchor < before-2 || anchor > after+2 {
		t.Errorf("the second turn came at Adapt+%.1fms; want Adapt+500ms", (float64(turns[1])-before)/1e3)
	}
	if float64(turns[4]) < before+2e6 || float64(turns[4]) > after+2e6+200e3 {
		t.Errorf("the fifth turn came at Adapt+%.1fms; want at the reset (2 s): the window was spent, and it is the probe", (float64(turns[4])-before)/1e3)
	}
}
