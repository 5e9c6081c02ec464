package distributed

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/throttle-go/throttle"
	"golang.org/x/time/rate"
)

// TestInvalid checks that bad limits and costs fail with the right error
// before any Redis call, by throttle.Limit's rules: the client points at
// a port nothing listens on, and FailClosed would turn any call into
// ErrStoreUnavailable.
func TestInvalid(t *testing.T) {
	c := newClient(t, "127.0.0.1:1")
	tests := []struct {
		name  string
		limit throttle.Limit
		n     int
		want  error
	}{
		{"negative rate", throttle.Limit{Rate: -5, Burst: 10}, 1, throttle.ErrInvalidLimit},
		{"NaN rate", throttle.Limit{Rate: rate.Limit(math.NaN()), Burst: 10}, 1, throttle.ErrInvalidLimit},
		{"negative burst", throttle.Limit{Rate: 10, Burst: -1}, 1, throttle.ErrInvalidLimit},
		{"window without a count", throttle.Limit{Per: time.Minute}, 1, throttle.ErrInvalidLimit},
		{"window without a period", throttle.Limit{Count: 10}, 1, throttle.ErrInvalidLimit},
		{"window of no kind", throttle.Limit{Count: 10, Per: time.Minute, Kind: 9}, 1, throttle.ErrInvalidLimit},
		{"sliding log too long", throttle.Limit{Count: throttle.MaxLogCount + 1, Per: time.Minute, Kind: throttle.SlidingLog}, 1, throttle.ErrInvalidLimit},
		{"negative cost", throttle.Limit{Rate: 10, Burst: 10}, -1, throttle.ErrInvalidLimit},
		{"cost above burst", throttle.Limit{Rate: 10, Burst: 10}, 11, throttle.ErrCostExceedsBurst},
		{"cost above burst 0 (1)", throttle.Limit{Rate: 10}, 2, throttle.ErrCostExceedsBurst},
		{"cost above a window's count", throttle.Limit{Count: 10, Per: time.Minute}, 11, throttle.ErrCostExceedsBurst},
		{"zero cost", throttle.Limit{Rate: 10, Burst: 10}, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := New(c, "invalid", tt.limit)
			q.FailMode = FailClosed
			err := q.WaitN(context.Background(), tt.n)
			if tt.want == nil && err != nil || !errors.Is(err, tt.want) {
				t.Errorf("WaitN(%d) with %v = %v; want %v", tt.n, tt.limit, err, tt.want)
			}
			if errors.Is(err, ErrStoreUnavailable) {
				t.Errorf("WaitN(%d) reached Redis: %v", tt.n, err)
			}
		})
	}
}

func TestNewNilClientPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Errorf("New(nil, …) did not panic")
		}
	}()
	New(nil, "q", throttle.Limit{Rate: 1, Burst: 1})
}

// TestDeadline: a turn past the deadline is refused at once and reserves
// nothing, so the next caller's turn is unchanged.
func TestDeadline(t *testing.T) {
	_, c := startRedis(t)
	q := New(c, "deadline", throttle.Limit{Rate: 2, Burst: 1}) // one unit per 500ms
	w := q.For("k").(*keyWaiter)
	ctx := context.Background()
	if err := w.WaitN(ctx, 1); err != nil { // takes the burst
		t.Fatalf("first WaitN = %v; want nil", err)
	}
	before, _, _ := hashState(t, c, w.rkey)

	dctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := w.WaitN(dctx, 1)
	elapsed := time.Since(start)
	var de *throttle.DeadlineError
	if !errors.As(err, &de) || !errors.Is(err, throttle.ErrWouldExceedDeadline) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitN past deadline = %v; want a *DeadlineError matching ErrWouldExceedDeadline and DeadlineExceeded", err)
	}
	if de.Key != "k" || de.Delay < 300*time.Millisecond || de.Delay > 500*time.Millisecond {
		t.Errorf("DeadlineError = %+v; want Key \"k\", Delay in (300ms, 500ms]", de)
	}
	// One loopback round trip: 50ms leaves room for -race on a busy machine
	// and is still half the 100ms the wait would have slept at least.
	if elapsed > 50*time.Millisecond {
		t.Errorf("refused WaitN took %v; want an immediate return (< 50ms)", elapsed)
	}
	if after, _, _ := hashState(t, c, w.rkey); after != before {
		t.Errorf("refused WaitN changed t from %.0f to %.0f; want unchanged", before, after)
	}
	// The next caller is served at the first free turn: ≤ 500ms, not 1s.
	start = time.Now()
	if err := w.WaitN(ctx, 1); err != nil {
		t.Fatalf("WaitN after refusal = %v", err)
	}
	if got := time.Since(start); got > 500*time.Millisecond+50*time.Millisecond {
		t.Errorf("WaitN after a refused one slept %v; want ≤ 500ms (+50ms scheduling)", got)
	}
}

// TestCancelRefunds: a wait cancelled while sleeping gives back exactly n.
func TestCancelRefunds(t *testing.T) {
	_, c := startRedis(t)
	const limit, burst, n = 10, 5, 3 // 100ms per unit
	q := New(c, "refund", throttle.Limit{Rate: limit, Burst: burst})
	w := q.For("k").(*keyWaiter)
	ctx := context.Background()
	for range 2 { // spend the burst and then some: tat = now + 1s
		if err := w.WaitN(ctx, 5); err != nil {
			t.Fatalf("WaitN(5) = %v", err)
		}
	}
	// The next wait of n = 3 would end 300ms after tat; cancel it at 50ms.
	before, _, _ := hashState(t, c, w.rkey)
	// Cancel (no deadline, so the script reserves) 50ms into the sleep.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	timer := time.AfterFunc(50*time.Millisecond, cancel)
	defer timer.Stop()
	start := time.Now()
	err := w.WaitN(cctx, n)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled WaitN = %v; want context.Canceled", err)
	}
	if got := time.Since(start); got > 100*time.Millisecond {
		t.Errorf("cancelled WaitN returned after %v; want promptly after the 50ms cancel", got)
	}
	after, _, _ := hashState(t, c, w.rkey)
	if got, want := after-before, 0.0; math.Abs(got-want) > 0.001 {
		t.Errorf("t after reserve+refund of %d units moved by %.3fµs; want %v (exactly n given back)", n, got, want)
	}
}

// TestIdleExpiry: a bucket's hash lives until the bucket would be full
// again and no unit was reserved for 2 s (the reservation counter's reach,
// see reserve.lua), plus the second of slack reserve.lua adds so that the
// next waits need no PEXPIRE, then disappears.
func TestIdleExpiry(t *testing.T) {
	t.Parallel()
	_, c := startRedis(t)
	q := New(c, "expiry", throttle.Limit{Rate: 1, Burst: 5}) // 1 s per unit
	w := q.For("k").(*keyWaiter)
	ctx := context.Background()
	if err := w.WaitN(ctx, 5); err != nil { // empties it: full again in 5 s
		t.Fatalf("WaitN(5) = %v", err)
	}
	_, _, pttl := hashState(t, c, w.rkey)
	if pttl <= 5900*time.Millisecond || pttl > 6*time.Second {
		t.Errorf("PTTL after spending the burst = %v; want (5.9s, 6s]: until the bucket is full, plus 1 s", pttl)
	}

	q = New(c, "expiry", throttle.Limit{Rate: 10, Burst: 5}) // 100ms per unit
	w = q.For("k2").(*keyWaiter)
	if err := w.WaitN(ctx, 5); err != nil { // full again in 500ms
		t.Fatalf("WaitN(5) = %v", err)
	}
	_, _, pttl = hashState(t, c, w.rkey)
	if pttl <= 2900*time.Millisecond || pttl > 3*time.Second {
		t.Errorf("PTTL after spending a 500ms burst = %v; want (2.9s, 3s]: the counter's reach, plus 1 s", pttl)
	}
	time.Sleep(pttl + 50*time.Millisecond)
	if n, err := c.Exists(ctx, w.rkey).Result(); err != nil || n != 0 {
		t.Errorf("EXISTS after the bucket refilled = %d, %v; want 0 (expired)", n, err)
	}
}

// TestInfiniteRate: rate.Inf never waits, but a pause still holds.
func TestInfiniteRate(t *testing.T) {
	_, c := startRedis(t)
	q := New(c, "inf", throttle.Limit{Rate: rate.Inf, Burst: 1})
	ctx := context.Background()
	for range 100 {
		if err := q.WaitN(ctx, 1); err != nil {
			t.Fatalf("WaitN at rate.Inf = %v", err)
		}
	}
	if err := q.For("").Pause(ctx, time.Second); err != nil {
		t.Fatalf("Pause = %v", err)
	}
	dctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	var de *throttle.DeadlineError
	if err := q.WaitN(dctx, 1); !errors.As(err, &de) || de.Delay < 900*time.Millisecond {
		t.Errorf("WaitN during a 1s pause with a 500ms deadline = %v; want a DeadlineError of about 1s (Limiter.WaitN waits on For(\"\"))", err)
	}
}

// TestLocalBucketsBounded: the FailLocal buckets stay under their cap
// however many keys fail over.
func TestLocalBucketsBounded(t *testing.T) {
	var l localBuckets
	now := time.Now()
	for i := range 3 * maxLocalBuckets {
		lim := l.get(strconv.Itoa(i), 100, 10, 4, now)
		if got, want := lim.Limit(), rate.Limit(25); got != want {
			t.Fatalf("local bucket rate = %v; want %v (rate ÷ workers)", got, want)
		}
		if got := lim.TokensAt(now); got != 3 {
			t.Fatalf("local bucket starts with %v tokens; want 3 (ceil(burst ÷ workers))", got)
		}
	}
	if n := len(l.m); n > maxLocalBuckets {
		t.Errorf("%d local buckets after %d keys; want ≤ %d", n, 3*maxLocalBuckets, maxLocalBuckets)
	}
}

// TestStoreUnavailable: with nothing listening, FailClosed waits and any
// Pause fail with ErrStoreUnavailable wrapping the cause, and once the
// breaker is open a wait fails without touching the network.
func TestStoreUnavailable(t *testing.T) {
	c := newClient(t, "127.0.0.1:1") // nothing listens on port 1
	q := New(c, "down", throttle.Limit{Rate: 10, Burst: 10})
	q.FailMode = FailClosed
	ctx := context.Background()
	for i := range breakerThreshold {
		err := q.WaitN(ctx, 1)
		if !errors.Is(err, ErrStoreUnavailable) || errors.Is(err, errBreakerOpen) {
			t.Fatalf("wait %d = %v; want ErrStoreUnavailable wrapping the dial error", i, err)
		}
	}
	start := time.Now()
	err := q.WaitN(ctx, 1)
	if !errors.Is(err, ErrStoreUnavailable) || !errors.Is(err, errBreakerOpen) {
		t.Errorf("wait with the breaker open = %v; want ErrStoreUnavailable wrapping errBreakerOpen", err)
	}
	if d := time.Since(start); d > 5*time.Millisecond {
		t.Errorf("wait with the breaker open took %v; want no store call (< 5ms)", d)
	}
	q.FailMode = FailOpen // safe here: no wait is running concurrently
	if err := q.WaitN(ctx, 1); err != nil {
		t.Errorf("FailOpen wait = %v; want nil", err)
	}
	if err := q.For("").Pause(ctx, time.Second); !errors.Is(err, ErrStoreUnavailable) {
		t.Errorf("Pause = %v; want ErrStoreUnavailable", err)
	}
}

// TestLimitsAsThrottleLimiter runs the same operations on a key of a
// throttle.Limiter and on one of a Limiter with the same limits, and
// checks that each answers alike (went or not, and the error's kind):
// the limits follow throttle.Limiter's rules, a window may be the first
// limit, Rate 0 lets its burst through and then none, no limit lets
// everything through, and the short forms spend every limit of Unit "".
func TestLimitsAsThrottleLimiter(t *testing.T) {
	_, c := startRedis(t)
	ctx := context.Background()
	type op struct {
		name string
		do   func(q throttle.Quota) (bool, error)
	}
	try := func(cost ...throttle.Cost) op {
		return op{fmt.Sprint("Try", cost), func(q throttle.Quota) (bool, error) {
			ok, _, err := q.Try(ctx, cost...)
			return ok, err
		}}
	}
	allowN := func(n int) op {
		return op{fmt.Sprint("AllowN ", n), func(q throttle.Quota) (bool, error) { return q.AllowN(n), nil }}
	}
	// A wait that would sleep fails at once: every turn that is not now
	// is an hour or more away in these limits.
	waitN := func(n int) op {
		return op{fmt.Sprint("WaitN ", n), func(q throttle.Quota) (bool, error) {
			ctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			err := q.WaitN(ctx, n)
			if errors.Is(err, throttle.ErrWouldExceedDeadline) {
				return false, nil
			}
			return err == nil, err
		}}
	}
	reserveN := func(n int) op {
		return op{fmt.Sprint("ReserveN ", n), func(q throttle.Quota) (bool, error) {
			r, err := q.ReserveN(ctx, n)
			if err != nil {
				return false, err
			}
			went := r.Delay() == 0
			r.Cancel()
			return went, nil
		}}
	}
	tokens := func(n, tok int) throttle.Cost { return throttle.Cost{N: n, Units: map[string]int{"tokens": tok}} }
	for _, tt := range []struct {
		name   string
		limits []throttle.Limit
		ops    []op
	}{
		{"window first", []throttle.Limit{{Count: 3, Per: time.Hour, Kind: throttle.SlidingLog}},
			[]op{waitN(1), allowN(1), try(), reserveN(1), allowN(1), waitN(1), try(), waitN(4)}},
		{"bucket and window of requests", []throttle.Limit{{Rate: 1000, Burst: 1000}, {Count: 2, Per: time.Hour}},
			[]op{waitN(2), try(), allowN(1), try(throttle.Cost{N: 3})}},
		{"rate 0", []throttle.Limit{{Burst: 2}},
			[]op{try(), allowN(1), try(), waitN(1), waitN(3)}},
		{"burst 0 is 1", []throttle.Limit{{Rate: 1.0 / 3600}},
			[]op{try(), try(), try(throttle.Cost{N: 2})}},
		{"no limit", nil,
			[]op{try(throttle.Cost{N: 1e6}), waitN(1e6), allowN(5)}},
		{"rate.Inf is no bucket", []throttle.Limit{{Rate: rate.Inf, Burst: 1}},
			[]op{waitN(5), try(throttle.Cost{N: 100})}},
		{"tokens", []throttle.Limit{{Rate: 1.0 / 3600, Burst: 3}, {Unit: "tokens", Rate: 1.0 / 3600, Burst: 100}},
			[]op{try(tokens(1, 60)), try(tokens(1, 60)), try(tokens(0, 60)), try(tokens(1, 40)), try(tokens(1, 1)),
				try(tokens(1, 101)), try(throttle.Cost{N: 1, Units: map[string]int{"": 1}}), try(throttle.Cost{N: 1, Units: map[string]int{"bytes": 1}}),
				try(tokens(1, -1)), try(throttle.Cost{N: -1})}},
		{"invalid", []throttle.Limit{{Count: 5}}, []op{try(), waitN(1)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			lk := (&throttle.Limiter{Limits: tt.limits}).For("k")
			q := New(c, "as-limiter-"+tt.name, tt.limits...)
			q.FailMode = FailClosed // a store error must show
			defer q.Close()
			qk := q.For("k")
			for i, o := range tt.ops {
				wok, werr := o.do(lk)
				gok, gerr := o.do(qk)
				if gok != wok || kind(gerr) != kind(werr) {
					t.Errorf("op %d, %s: Limiter %v, %v; throttle.Limiter %v, %v", i, o.name, gok, gerr, wok, werr)
				}
			}
		})
	}
}

// kind names the sentinel an error matches, for comparing errors of two
// implementations.
func kind(err error) string {
	for _, s := range []error{throttle.ErrInvalidLimit, throttle.ErrCostExceedsBurst, throttle.ErrWouldExceedDeadline, ErrStoreUnavailable} {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	if err != nil {
		return "other: " + err.Error()
	}
	return ""
}

// TestFailLocalFirstWindow: while Redis is away, FailLocal holds a
// window of the unit waits count at this process's share, as it holds a
// further limit of another unit: 10 an hour, 2 workers, 5 go.
func TestFailLocalFirstWindow(t *testing.T) {
	q := New(newClient(t, "127.0.0.1:1"), "down-window", throttle.Limit{Count: 10, Per: time.Hour})
	q.Workers = 2
	k := q.For("k")
	for i := range 5 {
		if ok, _, err := k.Try(context.Background()); !ok || err != nil {
			t.Fatalf("try %d of the share of 5 = %v, %v; want it to go", i+1, ok, err)
		}
	}
	if ok, d, err := k.Try(context.Background()); ok || err != nil || d <= 0 || d > time.Hour {
		t.Errorf("6th try in the hour = %v, %v, %v; want false, within the hour", ok, d, err)
	}
}
