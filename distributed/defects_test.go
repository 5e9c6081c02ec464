package distributed

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/throttle-go/throttle"
)

// Issue 7's defects, on Redis. Turns are read on Redis's clock (µs, from
// the script's TIME), so the bounds are exact up to the script's rounding
// of each wait to a µs; which waits reach Redis in which order is made
// certain by waiting for each to write its place (reached).

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

// TestRedisDefect5CancelledTurnNotShared: burst 1, 10/s. A goes at once;
// B (turn +100ms) and C (turn +200ms) wait; B is cancelled; D arrives.
// C moves up to B's turn and D takes C's: never two at one turn.
func TestRedisDefect5CancelledTurnNotShared(t *testing.T) {
	_, c := startRedis(t)
	q := New(c, "defect5", 10, 1)
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

// TestRedisDefect3PauseExtended: 10/s burst 2, the bucket emptied, a
// pause, six waits queued behind it, and an extension of the pause while
// they wait: nothing goes before the extended pause's end, and then at
// most the burst at once and the pace (any three turns ≥ 100ms apart).
func TestRedisDefect3PauseExtended(t *testing.T) {
	t.Parallel()
	_, c := startRedis(t)
	q := New(c, "defect3", 10, 2)
	q.Timeout = time.Second
	defer q.Close()
	w := q.For("k").(*keyWaiter)
	ctx := context.Background()
	for range 2 { // empty the bucket
		if _, err := w.waitN(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Pause(ctx, 400*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	var waits []func() (int64, error)
	for range 6 {
		waits = append(waits, startWait(t, ctx, w, 1))
	}
	before := redisNow(t, c)
	if err := w.Pause(ctx, 500*time.Millisecond); err != nil { // extends it
		t.Fatal(err)
	}
	end := before + 500e3 // the extended pause ends no earlier
	var turns []int64
	for _, f := range waits {
		turn, err := f()
		if err != nil {
			t.Fatal(err)
		}
		turns = append(turns, turn)
	}
	slices.Sort(turns)
	t.Logf("turns from the pause's end (ms): %v", relMs(turns, end))
	for i, turn := range turns {
		if float64(turn) < end {
			t.Errorf("turn %d came %.1fms before the pause's end", i, (end-float64(turn))/1e3)
		}
		if i >= 2 { // burst 2: three turns span at least one interval
			if d := turn - turns[i-2]; d < 100e3-2 {
				t.Errorf("turns %d and %d are %dµs apart; want ≥ 100000 (3 units with burst 2 at 10/s)", i-2, i, d)
			}
		}
	}
}

// TestRedisDefect3PauseExtendedAtItsEnd: 10/s, burst 10, the bucket
// full; a pause of 600ms, k waits queued in it (k ≤ burst: all due exactly
// at its end, the bucket not in debt), the pause extended to 1.5 s from
// then, and 10 more waits queued in the extension. The k + 10 units find
// a full bucket at the extended end: 10 go then, the rest one per 100ms.
// (The old scripts moved the queue's end only when its last turn,
// tat − burst·interval, was after the pause's start: a queue due exactly
// at the end was not moved, while its sleeping waits were, so the next
// waits, the extension being longer than k intervals (≥ 0.9 s), found the
// bucket full again and k + 10 went at the end: 13 with k = 3, 20 with
// k = 10.)
func TestRedisDefect3PauseExtendedAtItsEnd(t *testing.T) {
	const (
		burst    = 10
		interval = 100e3 // µs per unit at 10/s
	)
	for _, k := range []int{3, burst} {
		t.Run(fmt.Sprintf("k=%d", k), func(t *testing.T) {
			_, c := startRedis(t)
			q := New(c, "defect3end", 10, burst)
			q.Timeout = time.Second
			q.MaxLease = 1 // k waits, k tickets: the state counts them
			defer q.Close()
			w := q.For("k").(*keyWaiter)
			ctx := context.Background()
			if err := w.Pause(ctx, 600*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			_, end1, _ := hashState(t, c, w.rkey)
			var waits []func() (int64, error)
			for range k {
				waits = append(waits, startWait(t, ctx, w, 1))
			}
			// The k waits are queued and the first pause has not ended:
			// the extension comes while they are due exactly at its end.
			if st, err := w.State(ctx); err != nil || st.Queued != int64(k) {
				t.Fatalf("State = %+v, %v; want %d units queued", st, err, k)
			}
			if now := redisNow(t, c); now >= end1 {
				t.Fatalf("the first pause ended %.1fms before its extension; the machine is too slow for this test", (now-end1)/1e3)
			}
			if err := w.Pause(ctx, 1500*time.Millisecond); err != nil { // extends it
				t.Fatal(err)
			}
			_, end, _ := hashState(t, c, w.rkey)
			for range burst {
				waits = append(waits, startWait(t, ctx, w, 1))
			}
			var turns []int64
			for _, f := range waits {
				turn, err := f()
				if err != nil {
					t.Fatal(err)
				}
				turns = append(turns, turn)
			}
			slices.Sort(turns)
			t.Logf("pause extended by %.0fms; turns from its end (ms): %v", (end-end1)/1e3, relMs(turns, end))
			// A full bucket at the end: the first burst units go then,
			// each further one an interval after the one before. The
			// turns are Redis's µs; 2µs is the rounding of a wait to µs.
			for i, turn := range turns {
				want := end + float64(max(0, i-burst+1))*interval
				if d := float64(turn) - want; d < -2 || d > 2 {
					t.Errorf("turn %d at %+.3fms from the extended pause's end; want %+.3fms (burst %d, then 10/s)", i, (float64(turn)-end)/1e3, (want-end)/1e3, burst)
				}
			}
		})
	}
}

// TestRedisDefect4WindowFIFO: a spent window holds seven waits arriving
// 20ms apart. After the reset the first goes as the probe, and its
// response opens the next window, so the other six go at once, each no
// later than one that came after it (their turns, on Redis's clock, are
// the moment each learned it, within a push's round trip: 15ms). On the
// old code they polled and raced: the 7th arrival waited 20 s.
func TestRedisDefect4WindowFIFO(t *testing.T) {
	_, c := startRedis(t)
	q := New(c, "defect4", 1000, 10)
	q.Timeout = time.Second
	defer q.Close()
	w := q.For("k").(*keyWaiter)
	ctx := context.Background()
	before := redisNow(t, c)
	if err := w.Adapt(ctx, throttle.Feedback{HasRemaining: true, Remaining: 0, Reset: 500 * time.Millisecond}); err != nil {
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
					if err := w.Adapt(ctx, throttle.Feedback{HasRemaining: true, Remaining: 20, Reset: 10 * time.Second}); err != nil {
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

// TestRedisDefect8Refund: x/time/rate's cancellation case on Redis, burst
// 4 at 10/s: the bucket emptied, A waits 4 units (turn +400ms) and B 2
// (+600ms); A is cancelled: B moves up to +200ms, and C (2 units) follows
// at +400ms; no turn is given twice and no unit is lost.
func TestRedisDefect8Refund(t *testing.T) {
	_, c := startRedis(t)
	q := New(c, "defect8", 10, 4)
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

// TestRedisDefect4SpentWindowsFIFO: seven waits blocked on a spent window
// (1000/s, burst 10); every response says the next window is spent too,
// resetting 200ms later, so they go one probe at a time. They go in
// arrival order (the old scripts let blocked waits poll and race on each
// reset: the admission order came out shuffled).
func TestRedisDefect4SpentWindowsFIFO(t *testing.T) {
	t.Parallel()
	_, c := startRedis(t)
	q := New(c, "defect4probe", 1000, 10)
	q.Timeout = time.Second
	w := q.For("k").(*keyWaiter)
	ctx := context.Background()
	spent := throttle.Feedback{HasRemaining: true, Remaining: 0, Reset: 200 * time.Millisecond}
	if err := w.Adapt(ctx, spent); err != nil {
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
				if err := w.Adapt(ctx, spent); err != nil {
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
