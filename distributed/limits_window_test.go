package distributed

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/throttle-go/throttle"
)

// TestLimitsLogRedis checks a sliding log kept in Redis across calls and
// processes: two Limiters (each its own process's view) spend 1, then 2
// units of a log of 3 per second; a third is refused with the time the
// first leaves (the second from the first's turn, less the time since),
// and it goes once that has passed but not earlier than the refusal said;
// a log above MaxLogCount is refused on every wait.
func TestLimitsLogRedis(t *testing.T) {
	t.Parallel()
	_, c := startRedis(t)
	qs := twoProcesses(t, c, "limits-log", throttle.Limit{Count: 3, Per: time.Second, Kind: throttle.SlidingLog})
	req := func(n int) throttle.Cost { return throttle.Cost{N: 1, Units: map[string]int{"requests": n}} }
	a, b := qs[0].For("k"), qs[1].For("k")
	before := time.Now()
	if ok, _, err := a.Try(t.Context(), req(1)); !ok || err != nil {
		t.Fatalf("first try: %v, %v; want ok", ok, err)
	}
	after := time.Now()
	time.Sleep(300 * time.Millisecond)
	if ok, _, err := b.Try(t.Context(), req(2)); !ok || err != nil {
		t.Fatalf("second try (2 units, another process): %v, %v; want ok", ok, err)
	}
	at := time.Now()
	ok, retryIn, err := a.Try(t.Context(), req(1))
	// The first unit went between before and after (on Redis's clock, the
	// same machine's): it leaves a second later.
	lo, hi := time.Second-time.Since(before), time.Second-at.Sub(after)
	if ok || err != nil || retryIn < lo || retryIn > hi {
		t.Fatalf("third try: %v, %v, %v; want refused, retry in [%v, %v]", ok, retryIn, err, lo, hi)
	}
	// A wait goes when the first unit leaves, not when the 2 do.
	start := time.Now()
	if err := qs[1].For("k").Wait(t.Context(), req(1)); err != nil {
		t.Fatal(err)
	}
	// Bounds: the time since the refusal is already gone (less 10 ms for
	// the try's round trip); 50 ms for the wake-up on a loaded machine.
	if d := time.Since(start); d < retryIn-start.Sub(at)-10*time.Millisecond || d > retryIn+50*time.Millisecond {
		t.Errorf("wait went after %v; want about %v (the first unit leaving)", d, retryIn)
	}

	big := New(c, "limits-log-big", throttle.Limit{Rate: 10, Burst: 10}, throttle.Limit{Unit: "requests", Count: throttle.MaxLogCount + 1, Per: time.Hour, Kind: throttle.SlidingLog})
	defer big.Close()
	if _, _, err := big.For("k").Try(t.Context(), req(1)); !errors.Is(err, throttle.ErrInvalidLimit) {
		t.Errorf("a log of %d: %v; want ErrInvalidLimit", throttle.MaxLogCount+1, err)
	}
}

// TestLimitsFirstUseRedis checks a window aligned to first use kept in
// Redis across calls and processes: 3 per second from the first request
// (another process's), so the fourth's retry-in is a second from it,
// whatever the phase of the clock's second; after a quiet spell (1.3 s)
// the next window starts at the next request, not at 2 s.
func TestLimitsFirstUseRedis(t *testing.T) {
	t.Parallel()
	_, c := startRedis(t)
	qs := twoProcesses(t, c, "limits-first-use", throttle.Limit{Count: 3, Per: time.Second, Kind: throttle.FromFirstUse})
	req := func(n int) throttle.Cost { return throttle.Cost{N: 1, Units: map[string]int{"requests": n}} }
	a, b := qs[0].For("k"), qs[1].For("k")
	// window tries 3 units (1 by a, 2 by b), then 1 more by a, which is
	// refused until a second after the first went (between before and
	// after it, on Redis's clock: the same machine's).
	window := func(name string) {
		t.Helper()
		before := time.Now()
		if ok, _, err := a.Try(t.Context(), req(1)); !ok || err != nil {
			t.Fatalf("%s: first try: %v, %v; want ok", name, ok, err)
		}
		after := time.Now()
		time.Sleep(200 * time.Millisecond)
		if ok, _, err := b.Try(t.Context(), req(2)); !ok || err != nil {
			t.Fatalf("%s: second try (2 units, another process): %v, %v; want ok", name, ok, err)
		}
		at := time.Now()
		ok, retryIn, err := a.Try(t.Context(), req(1))
		lo, hi := time.Second-time.Since(before), time.Second-at.Sub(after)
		if ok || err != nil || retryIn < lo || retryIn > hi {
			t.Fatalf("%s: third try: %v, %v, %v; want refused, retry in [%v, %v]", name, ok, retryIn, err, lo, hi)
		}
	}
	window("first window")
	time.Sleep(1300 * time.Millisecond) // 1.5 s from the first: past its window
	window("after a quiet spell")
}

// TestLimitsLogRedisBounded checks that a sliding log in Redis keeps no
// more than Count entries: 30 waits of a unit through a log of 5 per
// 200 ms (1.2 s), then the log in the key's hash (the first limit's
// count slot, {count, time, units, …}) is read back by a script.
func TestLimitsLogRedisBounded(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("real clock: 1.2 s")
	}
	_, c := startRedis(t)
	q := New(c, "limits-log-bounded", throttle.Limit{Rate: 1e9, Burst: 1e6}, throttle.Limit{Unit: "requests", Count: 5, Per: 200 * time.Millisecond, Kind: throttle.SlidingLog})
	q.Timeout = time.Second
	defer q.Close()
	w := q.For("k")
	for range 30 {
		if err := w.Wait(t.Context(), throttle.Cost{N: 1, Units: map[string]int{"requests": 1}}); err != nil {
			t.Fatal(err)
		}
	}
	// x: a[27] is the limits' state, flat: k, floor, ver, spec, then
	// the first limit's six slots, its third the log.
	n, err := c.Eval(t.Context(), `local a = cmsgpack.unpack(redis.call('HGET', KEYS[1], 'x'))
		return #a[27][7]`, []string{redisKey("", "limits-log-bounded", "k")}).Int()
	if err != nil {
		t.Fatal(err)
	}
	if entries := (n - 1) / 2; entries < 1 || entries > 5 {
		t.Errorf("the log in Redis holds %d entries after 30 waits; want 1 to 5 (Count)", entries)
	}
}

// TestLimitsLogVersion checks that a sliding log's times carry over when
// a higher Version changes its count: 3 of 3 spent, then under a count
// of 4 one more goes and the next is refused (the 3 still count).
func TestLimitsLogVersion(t *testing.T) {
	_, c := startRedis(t)
	mk := func(count, version int) throttle.Quota {
		q := New(c, "limits-log-version", throttle.Limit{Rate: 1e9, Burst: 1e6}, throttle.Limit{Unit: "requests", Count: count, Per: time.Minute, Kind: throttle.SlidingLog})
		q.Version = version
		t.Cleanup(func() { q.Close() })
		return q.For("k")
	}
	one := throttle.Cost{N: 1, Units: map[string]int{"requests": 1}}
	old, raised := mk(3, 0), mk(4, 1)
	var got []bool
	for _, w := range []throttle.Quota{old, old, old, old, raised, raised} {
		ok, _, err := w.Try(t.Context(), one)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ok)
	}
	if want := []bool{true, true, true, false, true, false}; !slices.Equal(got, want) {
		t.Errorf("tries went %v; want %v", got, want)
	}
}
