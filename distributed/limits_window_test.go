package distributed

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/throttle-go/throttle"
)

// TestLimitsLogRedis checks a sliding log kept in Redis across calls and
// processes: two Quotas (each its own process's view) spend 1, then 2
// units of a log of 3 per second; a third is refused with the time the
// first leaves (the second from the first's turn, less the time since),
// and it goes once that has passed but not earlier than the refusal said;
// a log above MaxLogCount is refused on every wait.
func TestLimitsLogRedis(t *testing.T) {
	t.Parallel()
	_, c := startRedis(t)
	qs := twoProcesses(t, c, "limits-log", throttle.Window{Count: 3, Per: time.Second, Log: true})
	req := func(n int) throttle.Cost { return throttle.Cost{Units: []throttle.UnitCost{{Unit: "requests", N: n}}} }
	a, b := qs[0].For("k").(throttle.CostTrier), qs[1].For("k").(throttle.CostTrier)
	before := time.Now()
	if ok, _, err := a.TryCost(t.Context(), req(1)); !ok || err != nil {
		t.Fatalf("first try: %v, %v; want ok", ok, err)
	}
	after := time.Now()
	time.Sleep(300 * time.Millisecond)
	if ok, _, err := b.TryCost(t.Context(), req(2)); !ok || err != nil {
		t.Fatalf("second try (2 units, another process): %v, %v; want ok", ok, err)
	}
	at := time.Now()
	ok, retryIn, err := a.TryCost(t.Context(), req(1))
	// The first unit went between before and after (on Redis's clock, the
	// same machine's): it leaves a second later.
	lo, hi := time.Second-time.Since(before), time.Second-at.Sub(after)
	if ok || err != nil || retryIn < lo || retryIn > hi {
		t.Fatalf("third try: %v, %v, %v; want refused, retry in [%v, %v]", ok, retryIn, err, lo, hi)
	}
	// A wait goes when the first unit leaves, not when the 2 do.
	start := time.Now()
	if err := qs[1].For("k").(throttle.CostWaiter).WaitCost(t.Context(), req(1)); err != nil {
		t.Fatal(err)
	}
	// Bounds: the time since the refusal is already gone (less 10 ms for
	// the try's round trip); 50 ms for the wake-up on a loaded machine.
	if d := time.Since(start); d < retryIn-start.Sub(at)-10*time.Millisecond || d > retryIn+50*time.Millisecond {
		t.Errorf("wait went after %v; want about %v (the first unit leaving)", d, retryIn)
	}

	big := New(c, "limits-log-big", 10, 10)
	big.Limits = []throttle.UnitLimit{{Unit: "requests", Window: throttle.Window{Count: throttle.MaxLogCount + 1, Per: time.Hour, Log: true}}}
	defer big.Close()
	if _, _, err := big.For("k").(throttle.CostTrier).TryCost(t.Context(), req(1)); !errors.Is(err, throttle.ErrInvalidLimit) {
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
	qs := twoProcesses(t, c, "limits-first-use", throttle.Window{Count: 3, Per: time.Second, FirstUse: true})
	req := func(n int) throttle.Cost { return throttle.Cost{Units: []throttle.UnitCost{{Unit: "requests", N: n}}} }
	a, b := qs[0].For("k").(throttle.CostTrier), qs[1].For("k").(throttle.CostTrier)
	// window tries 3 units (1 by a, 2 by b), then 1 more by a, which is
	// refused until a second after the first went (between before and
	// after it, on Redis's clock: the same machine's).
	window := func(name string) {
		t.Helper()
		before := time.Now()
		if ok, _, err := a.TryCost(t.Context(), req(1)); !ok || err != nil {
			t.Fatalf("%s: first try: %v, %v; want ok", name, ok, err)
		}
		after := time.Now()
		time.Sleep(200 * time.Millisecond)
		if ok, _, err := b.TryCost(t.Context(), req(2)); !ok || err != nil {
			t.Fatalf("%s: second try (2 units, another process): %v, %v; want ok", name, ok, err)
		}
		at := time.Now()
		ok, retryIn, err := a.TryCost(t.Context(), req(1))
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
	q := New(c, "limits-log-bounded", 1e9, 1e6)
	q.Limits = []throttle.UnitLimit{{Unit: "requests", Window: throttle.Window{Count: 5, Per: 200 * time.Millisecond, Log: true}}}
	q.Timeout = time.Second
	defer q.Close()
	w := q.For("k").(throttle.CostWaiter)
	for range 30 {
		if err := w.WaitCost(t.Context(), throttle.Cost{Units: []throttle.UnitCost{{Unit: "requests", N: 1}}}); err != nil {
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
	mk := func(count, version int) throttle.CostTrier {
		q := New(c, "limits-log-version", 1e9, 1e6)
		q.Limits = []throttle.UnitLimit{{Unit: "requests", Window: throttle.Window{Count: count, Per: time.Minute, Log: true}}}
		q.Version = version
		t.Cleanup(func() { q.Close() })
		return q.For("k").(throttle.CostTrier)
	}
	one := throttle.Cost{Units: []throttle.UnitCost{{Unit: "requests", N: 1}}}
	old, raised := mk(3, 0), mk(4, 1)
	var got []bool
	for _, w := range []throttle.CostTrier{old, old, old, old, raised, raised} {
		ok, _, err := w.TryCost(t.Context(), one)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ok)
	}
	if want := []bool{true, true, true, false, true, false}; !slices.Equal(got, want) {
		t.Errorf("tries went %v; want %v", got, want)
	}
}
