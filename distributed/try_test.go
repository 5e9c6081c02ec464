package distributed

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/throttle-go/throttle"
)

// TestTry: tries spend while the bucket holds units; a refused try
// reports the wait's turn and writes nothing (the hash is byte for byte
// as it was, its TTL not extended). At 2/s, so that the refusal does not
// hang on the test's steps taking under 0.5 s on the real clock.
func TestTry(t *testing.T) {
	_, c := startRedis(t)
	q := New(c, "try", throttle.Limit{Rate: 2, Burst: 3})
	ctx := context.Background()
	t0 := time.Now()
	for i := range 3 {
		if ok, d, err := q.For("").Try(ctx, throttle.Cost{N: 1}); !ok || d != 0 || err != nil {
			t.Fatalf("try %d of a full bucket of 3 = %v, %v, %v; want true, 0, nil", i, ok, d, err)
		}
	}
	rkey := redisKey("", "try", "")
	before, err := c.HGetAll(ctx, rkey).Result()
	if err != nil {
		t.Fatal(err)
	}
	ttl0 := c.PTTL(ctx, rkey).Val()
	ok, d, err := q.For("").Try(ctx, throttle.Cost{N: 2})
	// Two units at 2/s from the bucket the first try found full: 1 s
	// after that try, less the time since.
	if ok || err != nil || d > time.Second || d < time.Second-time.Since(t0) {
		t.Errorf("Try(2) of an empty bucket at 2/s = %v, %v, %v; want false, ≤ 1s, nil", ok, d, err)
	}
	for range 5 {
		_, _, _ = q.For("").Try(ctx, throttle.Cost{N: 1})
	}
	after, _ := c.HGetAll(ctx, rkey).Result()
	if len(after) != len(before) || after["c"] != before["c"] || after["x"] != before["x"] {
		t.Errorf("refused tries changed the state")
	}
	if ttl := c.PTTL(ctx, rkey).Val(); ttl > ttl0 {
		t.Errorf("refused tries extended the TTL: %v, was %v", ttl, ttl0)
	}
	// A wait goes at the turn the try reported: nothing was kept.
	start := time.Now()
	if err := q.WaitN(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if got := time.Since(start); got > 500*time.Millisecond+25*time.Millisecond {
		t.Errorf("a wait after refused tries took %v; want ≤ 500ms (+25ms for round trips and timers)", got)
	}
	if _, _, err := q.For("").Try(ctx, throttle.Cost{N: 4}); !errors.Is(err, throttle.ErrCostExceedsBurst) {
		t.Errorf("Try(4) of burst 3: %v; want ErrCostExceedsBurst", err)
	}
}

// TestTryPause: a fleet-wide pause refuses tries for its length.
func TestTryPause(t *testing.T) {
	_, c := startRedis(t)
	q := New(c, "trypause", throttle.Limit{Rate: 100, Burst: 10})
	ctx := context.Background()
	if err := q.For("").Pause(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	ok, d, err := q.For("").Try(ctx, throttle.Cost{N: 1})
	if ok || err != nil || d > time.Second || d < 900*time.Millisecond {
		t.Errorf("try in a pause of 1s = %v, %v, %v; want false, (0.9s, 1s], nil", ok, d, err)
	}
}

// TestTryConcurrent: a bucket of 50, 200 concurrent non-blocking
// callers: exactly 50 go.
func TestTryConcurrent(t *testing.T) {
	_, c := startRedis(t)
	q := New(c, "trymany", throttle.Limit{Rate: 0.01, Burst: 50}) // one unit per 100s: no refill during the test
	q.Timeout = time.Second                                       // 200 calls at once on a loaded machine
	var ok atomic.Int32
	var wg sync.WaitGroup
	for range 200 {
		wg.Go(func() {
			went, _, err := q.For("k").Try(context.Background(), throttle.Cost{N: 1})
			if err != nil {
				t.Errorf("Try: %v", err)
			}
			if went {
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 50 {
		t.Errorf("200 tries on a bucket of 50: %d went; want 50", ok.Load())
	}
}

// TestTryFailModes: without Redis, the FailMode decides.
func TestTryFailModes(t *testing.T) {
	c := newClient(t, "127.0.0.1:1")
	for _, tt := range []struct {
		mode FailMode
		ok   bool
		err  error
	}{{FailOpen, true, nil}, {FailClosed, false, ErrStoreUnavailable}, {FailLocal, true, nil}} {
		q := New(c, "tryfail", throttle.Limit{Rate: 10, Burst: 1})
		q.FailMode = tt.mode
		ok, _, err := q.For("").Try(context.Background(), throttle.Cost{N: 1})
		if ok != tt.ok || !errors.Is(err, tt.err) || (tt.err == nil && err != nil) {
			t.Errorf("FailMode %v: Try = %v, %v; want %v, %v", tt.mode, ok, err, tt.ok, tt.err)
		}
		if tt.mode == FailLocal {
			ok, d, err := q.For("").Try(context.Background(), throttle.Cost{N: 1})
			if ok || err != nil || d <= 0 || d > 100*time.Millisecond {
				t.Errorf("FailLocal, second try of a local bucket of 1 at 10/s = %v, %v, %v; want false, (0, 100ms], nil", ok, d, err)
			}
		}
	}
}

// TestState reads a key's state without writing it.
func TestState(t *testing.T) {
	_, c := startRedis(t)
	q := New(c, "state", throttle.Limit{Rate: 1, Burst: 5})
	ctx := context.Background()
	k := q.For("k")
	st, err := k.State(ctx)
	if err != nil || st.Tokens != 5 || st.Remaining != 5 || st.Next != 0 || st.Rate != 1 || st.Burst != 5 || st.Queued != 0 {
		t.Errorf("new key: %+v, %v; want 5 tokens, 5 remaining, next 0, rate 1, burst 5", st, err)
	}
	rkey := redisKey("", "state", "k")
	if n := c.Exists(ctx, rkey).Val(); n != 0 {
		t.Errorf("State created the key")
	}
	for range 3 {
		_ = q.For("k").WaitN(ctx, 1)
	}
	st, _ = k.State(ctx)
	// Two units left, and what refilled since (at 1/s: under 0.1 in the
	// test's time).
	if st.Tokens < 2 || st.Tokens > 2.1 || st.Remaining != 2 || st.Next != 0 {
		t.Errorf("after 3 of 5: %+v; want ~2 tokens, 2 remaining, next 0", st)
	}
	ttl0 := c.PTTL(ctx, rkey).Val()
	before := c.HGet(ctx, rkey, "c").Val()
	time.Sleep(5 * time.Millisecond)
	_, _ = k.State(ctx)
	if c.HGet(ctx, rkey, "c").Val() != before || c.PTTL(ctx, rkey).Val() > ttl0 {
		t.Errorf("State wrote the state or extended its TTL")
	}
	_ = q.For("k").Pause(ctx, 10*time.Second)
	st, _ = k.State(ctx)
	if st.Paused > 10*time.Second || st.Paused < 9*time.Second || st.Next != st.Paused || st.Remaining != 0 {
		t.Errorf("paused: %+v; want paused ~10s, next as much, remaining 0", st)
	}
	_, _ = q.For("k").Observe(ctx, throttle.Feedback{Window: &throttle.ServerWindow{Remaining: 30, Reset: 20 * time.Second, Size: 100}})
	st, _ = k.State(ctx)
	// 30 as the server counts them, less the units that went over the
	// last second or so and whose responses have not come (up to 3).
	if w := st.Window; w == nil || w.Remaining < 27 || w.Remaining > 30 || w.Reset > 20*time.Second || w.Reset < 19*time.Second {
		t.Errorf("window: %+v; want 27 to 30 left for ~20s", st)
	}
	if math.IsInf(st.Tokens, 0) {
		t.Errorf("tokens %v with a pace", st.Tokens)
	}

	dead := New(newClient(t, "127.0.0.1:1"), "state", throttle.Limit{Rate: 1, Burst: 5})
	if _, err := dead.For("").State(ctx); !errors.Is(err, ErrStoreUnavailable) {
		t.Errorf("State without Redis: %v; want ErrStoreUnavailable", err)
	}
}

// TestStateQueued: waits sleeping in the queue show in Queued and Next.
func TestStateQueued(t *testing.T) {
	_, c := startRedis(t)
	q := New(c, "statequeued", throttle.Limit{Rate: 1, Burst: 1})
	ctx, cancel := context.WithCancel(context.Background())
	defer q.Close()
	_ = q.WaitN(ctx, 1)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { _ = q.WaitN(ctx, 1) })
	}
	deadline := time.Now().Add(2 * time.Second)
	var st throttle.State
	for time.Now().Before(deadline) { // until both waits have their tickets
		st, _ = q.For("").State(context.Background())
		if st.Queued == 2 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if st.Queued != 2 || st.Next < 2500*time.Millisecond || st.Next > 3*time.Second || st.Tokens > -1.9 {
		t.Errorf("two queued at 1/s: %+v; want queued 2, next ~3s, tokens ~-2", st)
	}
	cancel()
	wg.Wait()
}

// TestOneCommandPerTryAndState: a try and a state are one EVALSHA each,
// and a state writes nothing (no HSET, PEXPIRE or PUBLISH).
func TestOneCommandPerTryAndState(t *testing.T) {
	s, c := startRedis(t)
	ctx := context.Background()
	q := New(c, "roundtrip-try", throttle.Limit{Rate: 1000, Burst: 1})
	w := q.For("k")
	_, _, _ = w.Try(ctx, throttle.Cost{N: 1}) // warm up: script load
	if reply, err := s.Do("CONFIG", "RESETSTAT"); err != nil || reply != "+OK" {
		t.Fatalf("CONFIG RESETSTAT = %q, %v", reply, err)
	}
	const n = 100
	for range n {
		_, _, _ = w.Try(ctx, throttle.Cost{N: 1})
	}
	if calls := commandStats(t, s); calls["evalsha"] != n {
		t.Errorf("%d tries: %d EVALSHA; want %d (all: %v)", n, calls["evalsha"], n, calls)
	}
	if reply, err := s.Do("CONFIG", "RESETSTAT"); err != nil || reply != "+OK" {
		t.Fatalf("CONFIG RESETSTAT = %q, %v", reply, err)
	}
	for range n {
		if _, err := w.State(ctx); err != nil {
			t.Fatal(err)
		}
	}
	calls := commandStats(t, s)
	if calls["evalsha"] != n {
		t.Errorf("%d states: %d EVALSHA; want %d (all: %v)", n, calls["evalsha"], n, calls)
	}
	for _, cmd := range []string{"hset", "pexpire", "publish", "hdel", "del"} {
		if calls[cmd] != 0 {
			t.Errorf("%d states ran %s %d times; want none (all: %v)", n, cmd, calls[cmd], calls)
		}
	}
}
