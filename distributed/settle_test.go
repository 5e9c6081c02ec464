package distributed

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/throttle-go/throttle"
)

// Settled costs on Redis: the turns are read on Redis's clock (see
// waiter_test.go), so they are exact to the script's µs rounding.

// TestRedisSettleMovesTurns: at 10/s, burst 5, A's wait of 5 empties the
// bucket and B's wait of 5, 20ms later, has its turn 500ms after A's.
// Settling A's as 2 moves B's turn to 200ms after A's (B sleeps: the
// move is pushed), as 8 to 800ms, as 10 (a debt of the whole burst) to
// 1 s, and as 15 to 1 s too (a charge is at most the burst: actual
// counts as at most spent + burst).
func TestRedisSettleMovesTurns(t *testing.T) {
	t.Parallel()
	_, c := startRedis(t)
	for _, tt := range []struct {
		actual int
		want   int64 // B's turn after A's, µs
	}{{5, 500e3}, {2, 200e3}, {8, 800e3}, {10, 1000e3}, {15, 1000e3}} {
		t.Run(fmt.Sprint(tt.actual), func(t *testing.T) {
			q := New(c, fmt.Sprint("settle-", tt.actual), throttle.Limit{Rate: 10, Burst: 5})
			q.Timeout = time.Second
			defer q.Close()
			w := q.For("k").(*keyWaiter)
			ctx := context.Background()
			a, err := w.waitN(ctx, 5)
			if err != nil {
				t.Fatal(err)
			}
			b := startWait(t, ctx, w, 5)
			if err := w.Settle(ctx, throttle.Cost{N: 5}, throttle.Cost{N: tt.actual}); err != nil {
				t.Fatalf("Settle(5, %d): %v", tt.actual, err)
			}
			bt, err := b()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("Settle(5, %d): B went %.3fms after A", tt.actual, float64(bt-a)/1e3)
			if got := bt - a; got < tt.want-2 || got > tt.want+2 {
				t.Errorf("after Settle(5, %d), B went %dµs after A; want %d", tt.actual, got, tt.want)
			}
		})
	}
}

// TestRedisSettleBounded: waits of 5 at A, +500ms and +1 s, A's settled
// as 0 at about +400ms, when the bucket would hold 9 with the 5 given
// back: B goes at once, C 500ms after the settle (the bucket held its burst, not
// more); costs no wait could have spent are refused before any call.
func TestRedisSettleBounded(t *testing.T) {
	t.Parallel()
	s, c := startRedis(t)
	q := New(c, "settle-bounded", throttle.Limit{Rate: 10, Burst: 5})
	q.Timeout = time.Second
	defer q.Close()
	w := q.For("k").(*keyWaiter)
	ctx := context.Background()
	a, err := w.waitN(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	b := startWait(t, ctx, w, 5)
	cw := startWait(t, ctx, w, 5)
	for redisNow(t, c) < float64(a)+400e3 {
		time.Sleep(5 * time.Millisecond)
	}
	before := redisNow(t, c)
	if err := w.Settle(ctx, throttle.Cost{N: 5}, throttle.Cost{N: 0}); err != nil {
		t.Fatal(err)
	}
	after := redisNow(t, c) // the settle ran between: at s
	bt, err1 := b()
	ct, err2 := cw()
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	t.Logf("B +%.3fms, C +%.3fms after A", float64(bt-a)/1e3, float64(ct-a)/1e3)
	if bt-a >= 500e3-10e3 {
		t.Errorf("B went %dµs after A; want at the settle (about 400000), before its turn 500000", bt-a)
	}
	// B went at s (its sleeper learns it a moment later), C 500ms after.
	if lo, hi := before+500e3-2, after+500e3+2; float64(ct) < lo || float64(ct) > hi {
		t.Errorf("C went %.0fµs after the settle's call; want 500000 (to %.0f): the give-back filled the bucket past its burst",
			float64(ct)-before, after-before+500e3)
	}
	if reply, err := s.Do("CONFIG", "RESETSTAT"); err != nil || reply != "+OK" {
		t.Fatalf("CONFIG RESETSTAT = %q, %v", reply, err)
	}
	for _, tt := range []struct {
		spent, actual int
		want          error
	}{{2, -1, throttle.ErrInvalidLimit}, {-1, 0, throttle.ErrInvalidLimit}, {6, 0, throttle.ErrCostExceedsBurst}} {
		if err := w.Settle(ctx, throttle.Cost{N: tt.spent}, throttle.Cost{N: tt.actual}); !errors.Is(err, tt.want) {
			t.Errorf("Settle(%d, %d) = %v; want %v", tt.spent, tt.actual, err, tt.want)
		}
	}
	if err := w.Settle(ctx, throttle.Cost{N: 3}, throttle.Cost{N: 3}); err != nil {
		t.Fatal(err)
	}
	if calls := commandStats(t, s); calls["evalsha"] != 0 {
		t.Errorf("refused settles and one that changes nothing made %d EVALSHA; want none (all: %v)", calls["evalsha"], calls)
	}
}

// TestRedisSettleAfterIdle: a charge to a bucket that has refilled since
// the wait is taken from the full bucket: at 10/s burst 5, a wait of 1, a
// second idle, the wait settled as 3: the next wait of 5 has its turn
// 200ms after the settle.
func TestRedisSettleAfterIdle(t *testing.T) {
	t.Parallel()
	_, c := startRedis(t)
	q := New(c, "settle-idle", throttle.Limit{Rate: 10, Burst: 5})
	q.Timeout = time.Second
	defer q.Close()
	w := q.For("k").(*keyWaiter)
	ctx := context.Background()
	if _, err := w.waitN(ctx, 1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	before := redisNow(t, c)
	if err := w.Settle(ctx, throttle.Cost{N: 1}, throttle.Cost{N: 3}); err != nil {
		t.Fatal(err)
	}
	after := redisNow(t, c)
	turn, err := w.waitN(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	if lo, hi := before+200e3-2, after+200e3+2; float64(turn) < lo || float64(turn) > hi {
		t.Errorf("the wait of 5 went %.0fµs after the settle's call; want 200000 (to %.0f)", float64(turn)-before, after-before+200e3)
	}
}

// TestOneCommandPerSettle: a settle is one EVALSHA; a give-back to a key
// without state writes nothing.
func TestOneCommandPerSettle(t *testing.T) {
	s, c := startRedis(t)
	ctx := context.Background()
	q := New(c, "roundtrip-settle", throttle.Limit{Rate: 1000, Burst: 10})
	w := q.For("k").(*keyWaiter)
	if err := w.Settle(ctx, throttle.Cost{N: 1}, throttle.Cost{N: 2}); err != nil { // warm up: script load
		t.Fatal(err)
	}
	if reply, err := s.Do("CONFIG", "RESETSTAT"); err != nil || reply != "+OK" {
		t.Fatalf("CONFIG RESETSTAT = %q, %v", reply, err)
	}
	const n = 100
	for i := range n {
		if err := w.Settle(ctx, throttle.Cost{N: 2}, throttle.Cost{N: 1 + 2*(i%2)}); err != nil {
			t.Fatal(err)
		}
	}
	if calls := commandStats(t, s); calls["evalsha"] != n {
		t.Errorf("%d settles: %d EVALSHA; want %d (all: %v)", n, calls["evalsha"], n, calls)
	}
	if reply, err := s.Do("CONFIG", "RESETSTAT"); err != nil || reply != "+OK" {
		t.Fatalf("CONFIG RESETSTAT = %q, %v", reply, err)
	}
	if err := q.For("fresh").(*keyWaiter).Settle(ctx, throttle.Cost{N: 5}, throttle.Cost{N: 1}); err != nil {
		t.Fatal(err)
	}
	calls := commandStats(t, s)
	for _, cmd := range []string{"hset", "pexpire", "publish"} {
		if calls[cmd] != 0 {
			t.Errorf("a give-back to a key without state ran %s %d times; want none (all: %v)", cmd, calls[cmd], calls)
		}
	}
}

// TestRedisSettleChargeBounded: a settle's charge is at most the burst
// (actual counts as at most spent + burst), the rest dropped and
// reported as an EventClamp, to OnEvent and to the call's context's
// function. At 10/s, burst 5: a wait of 1 settled as 2^31 leaves the
// bucket a debt of one unit (5 − 1 − 5), not of 2^31 units: the next
// unit's turn is within 200ms. A charge of the whole burst drops
// nothing, a give-back neither: no event.
func TestRedisSettleChargeBounded(t *testing.T) {
	_, c := startRedis(t)
	q := New(c, "settle-charge", throttle.Limit{Rate: 10, Burst: 5})
	q.MaxLease = 1
	q.Timeout = time.Second
	var mu sync.Mutex
	var events, told []throttle.Event
	q.OnEvent = func(e throttle.Event) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, e)
	}
	defer q.Close()
	ctx := throttle.WithEvents(context.Background(), func(e throttle.Event) {
		mu.Lock()
		defer mu.Unlock()
		told = append(told, e)
	})
	w := q.For("k")
	if err := w.WaitN(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := w.Settle(ctx, throttle.Cost{N: 1}, throttle.Cost{N: 1 << 31}); err != nil {
		t.Fatalf("Settle(1, 2^31) = %v", err)
	}
	want := throttle.Event{Kind: throttle.EventClamp, Key: "k", Units: 1<<31 - 1 - 5}
	mu.Lock()
	if len(events) != 1 || events[0] != want || len(told) != 1 || told[0] != want {
		t.Errorf("Settle(1, 2^31) told OnEvent %+v, the context %+v; want one %+v each", events, told, want)
	}
	events, told = nil, nil
	mu.Unlock()
	ok, d, err := w.Try(ctx)
	if ok || err != nil || d <= 0 || d > 200*time.Millisecond {
		t.Errorf("after the settle, Try = %v, %v, %v; want false, its turn within 200ms", ok, d, err)
	}
	for _, tt := range []struct{ spent, actual int }{{1, 6}, {5, 0}} {
		w := q.For(fmt.Sprint(tt))
		if err := w.WaitN(ctx, tt.spent); err != nil {
			t.Fatal(err)
		}
		if err := w.Settle(ctx, throttle.Cost{N: tt.spent}, throttle.Cost{N: tt.actual}); err != nil {
			t.Errorf("Settle(%d, %d) = %v", tt.spent, tt.actual, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events)+len(told) != 0 {
		t.Errorf("settles that drop nothing told %+v and %+v; want no event", events, told)
	}
}
