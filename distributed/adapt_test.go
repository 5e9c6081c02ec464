package distributed

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttle-go/throttle"
)

var (
	_ throttle.Adapter = (*Quota)(nil)
	_ throttle.Adapter = (*keyWaiter)(nil)
)

// hashFloat reads one numeric field of a bucket's hash; ok is false when
// the field is absent.
func hashFloat(tb testing.TB, c redis.UniversalClient, rkey, field string) (v float64, ok bool) {
	tb.Helper()
	s, err := c.HGet(context.Background(), rkey, field).Result()
	if errors.Is(err, redis.Nil) {
		return 0, false
	}
	if err != nil {
		tb.Fatalf("HGET %q %s: %v", rkey, field, err)
	}
	var f float64
	if _, err := fmt.Sscan(s, &f); err != nil {
		tb.Fatalf("field %s of %q = %q: not a number", field, rkey, s)
	}
	return f, true
}

// TestAdaptNothing: a Feedback that says nothing makes no Redis call.
func TestAdaptNothing(t *testing.T) {
	c := newClient(t, "127.0.0.1:1") // nothing listens: any call would fail
	q := New(c, "adapt-nothing", 10, 1)
	q.FailMode = FailClosed
	if err := q.For("k").(throttle.Adapter).Adapt(context.Background(), throttle.Feedback{Age: time.Second}); err != nil {
		t.Errorf("Adapt(empty Feedback) = %v; want nil without a call", err)
	}
	if q.br.failures != 0 {
		t.Errorf("Adapt(empty Feedback) reached the store (%d failures)", q.br.failures)
	}
}

// TestAdaptOutage: during an outage, Adapt neither blocks nor fails for
// advice (a window, a rejection); a pause that could not be written is
// reported as ErrStoreUnavailable, as Pause does, so that Transport does
// not report a pause that did not happen.
func TestAdaptOutage(t *testing.T) {
	c := newClient(t, "127.0.0.1:1")
	q := New(c, "adapt-outage", 10, 1)
	w := q.For("k").(throttle.Adapter)
	ctx := context.Background()
	start := time.Now()
	if err := w.Adapt(ctx, throttle.Feedback{HasWindow: true, Remaining: 3, Reset: time.Second, Throttled: true}); err != nil {
		t.Errorf("Adapt(window, throttled) during an outage = %v; want nil", err)
	}
	if err := w.Adapt(ctx, throttle.Feedback{Pause: time.Second}); !errors.Is(err, ErrStoreUnavailable) {
		t.Errorf("Adapt(pause) during an outage = %v; want ErrStoreUnavailable", err)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("two Adapt calls during an outage took %v; want each bounded by Timeout (50ms)", d)
	}
}

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

// TestWindowFleet: two workers (two Quotas, two clients, one Redis) share
// a key. One of them learns a window of 5 units left until a reset 2 s
// away (size 10, so 5 left is not low and nothing spreads). Together, 8
// goroutines get exactly 5 turns before the reset, all at once; then the
// first wait after the reset goes alone as a probe; its response tells a
// new window of 3, and exactly 3 more turns follow. The run ends 1.5 s
// after the reset, before the second window's reset, so the count is
// exact: 5 + 1 + 3.
func TestWindowFleet(t *testing.T) {
	s, c1 := startRedis(t)
	c2 := newClient(t, s.Addr())
	q1, q2 := New(c1, "window-fleet", 1000, 10), New(c2, "window-fleet", 1000, 10)
	q1.Timeout, q2.Timeout = time.Second, time.Second // a busy machine is no outage
	w1, w2 := q1.For("api").(*keyWaiter), q2.For("api").(*keyWaiter)
	ctx := context.Background()
	win := func(left float64) throttle.Feedback {
		return throttle.Feedback{HasWindow: true, Remaining: left, Reset: 2 * time.Second, Size: 10, Window: 2 * time.Second}
	}
	before := redisNow(t, c1)
	if err := w1.Adapt(ctx, win(5)); err != nil {
		t.Fatalf("Adapt = %v", err)
	}
	after := redisNow(t, c1)
	// The reset is Adapt's TIME + 2 s: between these two.
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
					if err := w.Adapt(ctx, win(3)); err != nil {
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
	t.Logf("turns relative to Adapt (ms): %v; reset in [%.1f, %.1f]", relMs(turns, before), (resetLo-before)/1e3, (resetHi-before)/1e3)
	if len(first) != 5 {
		t.Errorf("%d turns before the reset; want exactly 5 (the window's remaining)", len(first))
	}
	for _, turn := range first {
		// Immediate: within 200ms of Adapt (scheduling of 8 goroutines
		// and their round trips on a loaded machine).
		if float64(turn)-after > 200e3 {
			t.Errorf("a turn of the first window came %.1fms after Adapt; want immediate", (float64(turn)-after)/1e3)
		}
	}
	if len(later) != 4 {
		t.Errorf("%d turns after the reset; want exactly 4 (the probe and the new window's 3)", len(later))
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
// reset: a waiter calling in a loop gets turns (reset - first turn)/4
// apart, 0.5 s less a quarter of the first round trip. The turns are
// exact on Redis's clock: each is computed from the one before, not from
// when the caller woke. The fifth wait is blocked until the reset and
// goes then as the probe.
func TestWindowSpread(t *testing.T) {
	_, c := startRedis(t)
	q := New(c, "window-spread", 1000, 1) // 1ms per unit: the window paces
	q.Timeout = time.Second
	w := q.For("api").(*keyWaiter)
	ctx := context.Background()
	before := redisNow(t, c)
	if err := w.Adapt(ctx, throttle.Feedback{HasWindow: true, Remaining: 4, Reset: 2 * time.Second}); err != nil {
		t.Fatalf("Adapt = %v", err)
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
	t.Logf("turns relative to Adapt (ms): %v", relMs(turns, before))
	step := float64(turns[3]-turns[0]) / 3
	for i := 1; i < 4; i++ {
		// Each wait rounds its µs up once: 2µs of slack.
		if d := float64(turns[i] - turns[i-1]); math.Abs(d-step) > 2 {
			t.Errorf("turn %d came %.0fµs after the one before; want the same spacing %.0fµs", i, d, step)
		}
	}
	// The spacing spreads the 4 units to the reset, Adapt's TIME + 2 s.
	if reset := float64(turns[0]) + 4*step; reset < before+2e6-4 || reset > after+2e6+4 {
		t.Errorf("first turn + 4 spacings = Adapt+%.1fms; want the reset, in [%.1f, %.1f]ms", (reset-before)/1e3, 2e3, (after+2e6-before)/1e3)
	}
	if step < 450e3 || step > 500e3 {
		t.Errorf("spacing %.1fms; want ≈ 500ms (2 s / 4, less a quarter of a round trip ≤ 200ms)", step/1e3)
	}
	if float64(turns[4]) < before+2e6 {
		t.Errorf("the fifth turn came at Adapt+%.1fms; want at or after the reset (2 s): the window was spent", (float64(turns[4])-before)/1e3)
	}
}

// cubicRate is adaptive.go's curve: the pace at t (µs) of a cut from am
// units/s at ac.
func cubicRate(am, ac, t float64) float64 {
	x := (t - ac - 1e6) / 1e6
	if x > 0 {
		x /= 3
	}
	return max(am+am*0.3*x*x*x, 0.1)
}

// TestAdaptiveFleet: worker B waits in a loop on a quota of 100/s (burst
// 1); worker A (another Quota, another client) reports bare rejections.
// Turns are on Redis's clock and each is computed from the one before, so
// the bounds are exact where B keeps up (a wait is one loopback round
// trip, well under the 10ms interval):
//
//   - Before: turns 10ms apart (≥ 10ms exactly; mean ≤ 11ms).
//   - A first rejection under the configured limit only shifts B's
//     schedule by 2 intervals: one gap of ≥ 20ms, no cut written.
//   - A second within 10 s cuts: wMax is the fleet's rate over the last
//     second (≤ 100/s, the configured rate; ≥ 50/s unless the machine
//     stalled B for half a second), and every later spacing is at least
//     the curve's interval at its turn (1/(0.7·wMax) right after the cut).
//     Over the first 300ms, B gets at most the curve's integral, 0.243·wMax,
//     plus 2 for rounding at the ends (24 at 100/s, against 30 before).
//   - A rejection whose request reserved before the cut (Age 1 s) is
//     ignored: the cut's fields are unchanged.
func TestAdaptiveFleet(t *testing.T) {
	s, c1 := startRedis(t)
	c2 := newClient(t, s.Addr())
	qa, qb := New(c1, "adaptive-fleet", 100, 1), New(c2, "adaptive-fleet", 100, 1)
	qa.Timeout, qb.Timeout = time.Second, time.Second
	a, b := qa.For("api").(*keyWaiter), qb.For("api").(*keyWaiter)
	ctx := context.Background()

	dctx, cancel := context.WithTimeout(ctx, 2500*time.Millisecond)
	defer cancel()
	var rec turnRecorder
	done := make(chan error, 1)
	go func() {
		for {
			turn, err := b.waitN(dctx, 1)
			if errors.Is(err, throttle.ErrWouldExceedDeadline) || dctx.Err() != nil {
				done <- nil
				return
			}
			if err != nil {
				done <- err
				return
			}
			rec.add(turn)
		}
	}()
	rejected := throttle.Feedback{Throttled: true}

	time.Sleep(1200 * time.Millisecond)
	shiftAt := redisNow(t, c1)
	if err := a.Adapt(ctx, rejected); err != nil {
		t.Fatalf("Adapt(throttled) = %v", err)
	}
	if _, ok := hashFloat(t, c1, a.rkey, "am"); ok {
		t.Errorf("a lone rejection under the configured limit cut the pace; want only a shift")
	}
	if al, ok := hashFloat(t, c1, a.rkey, "al"); !ok || al < shiftAt {
		t.Errorf("after a lone rejection, al = %.0f, %v; want the shift's time ≥ %.0f", al, ok, shiftAt)
	}

	time.Sleep(200 * time.Millisecond)
	if err := a.Adapt(ctx, rejected); err != nil {
		t.Fatalf("second Adapt(throttled) = %v", err)
	}
	am, okm := hashFloat(t, c1, a.rkey, "am")
	ac, okc := hashFloat(t, c1, a.rkey, "ac")
	if !okm || !okc {
		t.Fatalf("a second rejection within 10 s did not cut (am %v, ac %v)", okm, okc)
	}
	if am < 50 || am > 100 {
		t.Errorf("cut from wMax %.1f/s; want the measured rate, in [50, 100]", am)
	}

	// In flight before the cut: ignored.
	if err := a.Adapt(ctx, throttle.Feedback{Throttled: true, Age: time.Second}); err != nil {
		t.Fatalf("Adapt(throttled, Age 1s) = %v", err)
	}
	am2, _ := hashFloat(t, c1, a.rkey, "am")
	ac2, _ := hashFloat(t, c1, a.rkey, "ac")
	if am2 != am || ac2 != ac {
		t.Errorf("a rejection of a request reserved before the cut changed it: wMax %.1f → %.1f, cut at %.0f → %.0f; want ignored", am, am2, ac, ac2)
	}

	if err := <-done; err != nil {
		t.Fatalf("B's wait: %v", err)
	}
	turns := rec.sorted()

	// Before the shift (after B's first 200ms).
	var gaps []float64
	for i := 1; i < len(turns); i++ {
		if float64(turns[i-1]) >= float64(turns[0])+200e3 && float64(turns[i]) < shiftAt {
			gaps = append(gaps, float64(turns[i]-turns[i-1]))
		}
	}
	mean := func(xs []float64) float64 {
		s := 0.0
		for _, x := range xs {
			s += x
		}
		return s / float64(len(xs))
	}
	if len(gaps) < 50 {
		t.Fatalf("%d turns before the shift; want ≈ 100", len(gaps))
	}
	if slices.Min(gaps) < 10e3-1 || mean(gaps) > 11e3 {
		t.Errorf("before: spacing min %.2fms, mean %.2fms; want ≥ 10ms, mean ≤ 11ms", slices.Min(gaps)/1e3, mean(gaps)/1e3)
	}

	// The shift: one gap of ≥ 20ms within 100ms after it.
	longest := 0.0
	for i := 1; i < len(turns); i++ {
		if float64(turns[i]) > shiftAt && float64(turns[i-1]) < shiftAt+100e3 {
			longest = max(longest, float64(turns[i]-turns[i-1]))
		}
	}
	if longest < 20e3 {
		t.Errorf("longest gap after the shift %.2fms; want ≥ 20ms (2 intervals)", longest/1e3)
	}

	// After the cut.
	var after []float64
	inFirst := 0
	for i := 1; i+1 < len(turns); i++ {
		if float64(turns[i-1]) < ac {
			continue
		}
		// Reserved after the cut (B reserved turn i after waking at turn
		// i-1): spacing ≥ the curve's interval at turn i.
		d := float64(turns[i+1] - turns[i])
		after = append(after, d)
		if want := 1e6 / cubicRate(am, ac, float64(turns[i])); d < want-2 {
			t.Errorf("after the cut, turn at cut+%.1fms was followed after %.2fms; want ≥ %.2fms (the curve)", (float64(turns[i])-ac)/1e3, d/1e3, want/1e3)
		}
	}
	for _, turn := range turns {
		if float64(turn) >= ac && float64(turn) < ac+300e3 {
			inFirst++
		}
	}
	t.Logf("before: %d spacings, mean %.2fms; shift gap %.2fms; cut from %.1f/s: %d turns in the next 300ms (curve: %.1f), spacing mean %.2fms over %d",
		len(gaps), mean(gaps)/1e3, longest/1e3, am, inFirst, 0.243*am, mean(after)/1e3, len(after))
	if lim := int(0.243*am) + 2; inFirst > lim {
		t.Errorf("%d turns in the 300ms after the cut; want ≤ %d (the curve's integral + 2)", inFirst, lim)
	}
	if len(after) > 0 && after[0] < 1e6/(0.7*100)*0.95 {
		t.Errorf("first spacing after the cut %.2fms; want ≥ 13.6ms (1/(0.7·100/s), less 5%% for the curve's start)", after[0]/1e3)
	}
}
