package distributed

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/throttle-go/throttle"
)

// Waits, cancellations and spent windows on Redis. Turns are read on
// Redis's clock (µs, from the script's TIME), so the bounds are exact up
// to the script's rounding of each wait to a µs; which waits reach Redis
// in which order is made certain by waiting for each to write its place
// (startWait, reached).

// startWait starts w.waitN(ctx, n) in a goroutine and returns, once the
// wait has reached Redis and either went or sleeps on its turn listening
// for pushed moves, a function that waits for its result.
func startWait(tb testing.TB, ctx context.Context, w *keyWaiter, n int) func() (int64, error) {
	tb.Helper()
	var (
		turn int64
		err  error
		done = make(chan struct{})
	)
	before := sleeping(w.q)
	reached(tb, w.q.client, w.rkey, func() {
		go func() {
			defer close(done)
			turn, err = w.waitN(ctx, n)
		}()
	})
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		select {
		case <-done:
			return func() (int64, error) { return turn, err }
		default:
		}
		if _, sub := w.q.pushes.mark(); sub.up && sleeping(w.q) > before {
			return func() (int64, error) { <-done; return turn, err }
		}
		if time.Now().After(deadline) {
			tb.Fatalf("a wait neither went nor slept subscribed within 5 s")
		}
	}
}

// TestCancelledTurnNotShared: burst 1, 10/s. A goes at once;
// B (turn +100ms) and C (turn +200ms) wait; B is cancelled; D arrives.
// C moves up to B's turn and D takes C's: never two at one turn.
func TestCancelledTurnNotShared(t *testing.T) {
	_, c := startRedis(t)
	q := New(c, "cancel-turn", throttle.Limit{Rate: 10, Burst: 1})
	q.Timeout = time.Second
	defer q.Close()
	w := q.For("k").(*keyWaiter)
	ctx := context.Background()
	a, err := w.waitN(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	bctx, cancel := context.WithCancel(ctx)
	b := startWait(t, bctx, w, 1)
	cw := startWait(t, ctx, w, 1)
	cancel()
	if _, err := b(); !errors.Is(err, context.Canceled) {
		t.Fatalf("B = %v; want context.Canceled", err)
	}
	d := startWait(t, ctx, w, 1)
	ct, err1 := cw()
	dt, err2 := d()
	if err1 != nil || err2 != nil {
		t.Fatalf("C, D = %v, %v", err1, err2)
	}
	t.Logf("turns after A: C +%.3fms, D +%.3fms", float64(ct-a)/1e3, float64(dt-a)/1e3)
	if got := ct - a; got < 100e3-2 || got > 100e3+2 {
		t.Errorf("C went %dµs after A; want 100000 (B's turn, given back)", got)
	}
	if got := dt - a; got < 200e3-2 || got > 200e3+2 {
		t.Errorf("D went %dµs after A; want 200000 (after C, never with it)", got)
	}
}

// TestCancelMovesLaterTurnsUp: x/time/rate's cancellation case on Redis, burst
// 4 at 10/s: the bucket emptied, A waits 4 units (turn +400ms) and B 2
// (+600ms); A is cancelled: B moves up to +200ms, and C (2 units) follows
// at +400ms; no turn is given twice and no unit is lost.
func TestCancelMovesLaterTurnsUp(t *testing.T) {
	_, c := startRedis(t)
	q := New(c, "cancel-refund", throttle.Limit{Rate: 10, Burst: 4})
	q.Timeout = time.Second
	defer q.Close()
	w := q.For("k").(*keyWaiter)
	ctx := context.Background()
	t0, err := w.waitN(ctx, 4)
	if err != nil {
		t.Fatal(err)
	}
	actx, cancel := context.WithCancel(ctx)
	a := startWait(t, actx, w, 4)
	b := startWait(t, ctx, w, 2)
	cancel()
	if _, err := a(); !errors.Is(err, context.Canceled) {
		t.Fatalf("A = %v; want context.Canceled", err)
	}
	cw := startWait(t, ctx, w, 2)
	bt, err1 := b()
	ct, err2 := cw()
	if err1 != nil || err2 != nil {
		t.Fatalf("B, C = %v, %v", err1, err2)
	}
	t.Logf("after the first 4 units: B +%.3fms, C +%.3fms", float64(bt-t0)/1e3, float64(ct-t0)/1e3)
	for _, x := range []struct {
		name      string
		got, want int64
	}{{"B", bt - t0, 200e3}, {"C", ct - t0, 400e3}} {
		if x.got < x.want-2 || x.got > x.want+2 {
			t.Errorf("%s went %dµs after the first units; want %d", x.name, x.got, x.want)
		}
	}
}

// TestWindowResetKeepsArrivalOrder: a spent window holds seven waits,
// each reaching Redis after the one before. After the reset the first
// goes as the probe, and its response opens the next window, so the other
// six go at once, each no later than one that came after it (their turns,
// on Redis's clock, are the moment each learned it, within a push's round
// trip: 15ms), none polling.
func TestWindowResetKeepsArrivalOrder(t *testing.T) {
	_, c := startRedis(t)
	q := New(c, "window-fifo", throttle.Limit{Rate: 1000, Burst: 10})
	q.Timeout = time.Second
	defer q.Close()
	w := q.For("k").(*keyWaiter)
	ctx := context.Background()
	before := redisNow(t, c)
	if _, err := w.Observe(ctx, throttle.Feedback{Window: &throttle.ServerWindow{Remaining: 0, Reset: 500 * time.Millisecond}}); err != nil {
		t.Fatal(err)
	}
	turns := make([]int64, 7)
	var (
		once sync.Once
		wg   sync.WaitGroup
	)
	for i := range 7 {
		reached(t, c, w.rkey, func() {
			wg.Go(func() {
				turn, err := w.waitN(ctx, 1)
				if err != nil {
					t.Error(err)
					return
				}
				turns[i] = turn
				once.Do(func() { // the probe's response: a new window
					if _, err := w.Observe(ctx, throttle.Feedback{Window: &throttle.ServerWindow{Remaining: 20, Reset: 10 * time.Second}}); err != nil {
						t.Error(err)
					}
				})
			})
		})
	}
	wg.Wait()
	t.Logf("turns by arrival, from the window's reset (ms): %v", relMs(turns, before+500e3))
	for i := range turns {
		if float64(turns[i]) < before+500e3 {
			t.Errorf("arrival %d went %.1fms before the reset", i, (before+500e3-float64(turns[i]))/1e3)
		}
		for j := i + 1; j < len(turns); j++ {
			if turns[i] > turns[j]+15e3 {
				t.Errorf("arrival %d went %.1fms after arrival %d; want in arrival order", i, float64(turns[i]-turns[j])/1e3, j)
			}
		}
		if float64(turns[i]) > before+500e3+500e3 {
			t.Errorf("arrival %d went %.1fms after the reset; want within the probe's round trip", i, (float64(turns[i])-before-500e3)/1e3)
		}
	}
}

// TestSpentWindowsProbeInArrivalOrder: seven waits blocked on a spent window
// (1000/s, burst 10); every response says the next window is spent too,
// resetting 200ms later, so they go one probe at a time. They go in
// arrival order: blocked waits do not race each other at a reset.
func TestSpentWindowsProbeInArrivalOrder(t *testing.T) {
	t.Parallel()
	_, c := startRedis(t)
	q := New(c, "spent-fifo", throttle.Limit{Rate: 1000, Burst: 10})
	q.Timeout = time.Second
	w := q.For("k").(*keyWaiter)
	ctx := context.Background()
	spent := throttle.Feedback{Window: &throttle.ServerWindow{Remaining: 0, Reset: 200 * time.Millisecond}}
	if _, err := w.Observe(ctx, spent); err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	for i := range 7 {
		reached(t, c, w.rkey, func() {
			wg.Go(func() {
				if _, err := w.waitN(ctx, 1); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				// The probe's response: the next window is spent too.
				if _, err := w.Observe(ctx, spent); err != nil {
					t.Error(err)
				}
			})
		})
	}
	wg.Wait()
	t.Logf("admission order: %v", order)
	for i, a := range order {
		if a != i {
			t.Fatalf("admission order %v; want arrival order", order)
		}
	}
}
