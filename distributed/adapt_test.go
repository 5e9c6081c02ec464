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
	// The cut's fields live in the hash's x field, a MessagePack array
	// (see schedule.lua): c0 cw cf ca co cl cm at 12-18.
	ext := map[string]int{"c0": 12, "cw": 13, "cf": 14, "ca": 15, "co": 16, "cl": 17, "cm": 18}
	if i, isExt := ext[field]; isExt {
		r, err := stateScript.Run(context.Background(), c, []string{rkey}, i).Result()
		if errors.Is(err, redis.Nil) {
			return 0, false
		}
		if err != nil {
			tb.Fatalf("reading %s of %q: %v", field, rkey, err)
		}
		return float64(r.(int64)), true
	}
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

// stateScript returns element ARGV[1] of the hash's x array (whole
// numbers: the cut's fields are µs and rates that are whole in the tests),
// or nil when x is absent.
var stateScript = redis.NewScript(`
local x = redis.call('HGET', KEYS[1], 'x')
if not x then return nil end
local v = cmsgpack.unpack(x)[tonumber(ARGV[1])]
if v == nil then return nil end
return math.floor(v)
`)

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
	if err := w.Adapt(ctx, throttle.Feedback{HasRemaining: true, Remaining: 3, Reset: time.Second, Throttled: true}); err != nil {
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
	t.Parallel()
	s, c1 := startRedis(t)
	c2 := newClient(t, s.Addr())
	q1, q2 := New(c1, "window-fleet", 1000, 10), New(c2, "window-fleet", 1000, 10)
	q1.Timeout, q2.Timeout = time.Second, time.Second // a busy machine is no outage
	w1, w2 := q1.For("api").(*keyWaiter), q2.For("api").(*keyWaiter)
	ctx := context.Background()
	win := func(left float64) throttle.Feedback {
		return throttle.Feedback{HasRemaining: true, Remaining: left, Reset: 2 * time.Second, Size: 10, Window: 2 * time.Second}
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
	q := New(c, "window-spread", 1000, 1) // 1ms per unit: the window paces
	q.Timeout = time.Second
	w := q.For("api").(*keyWaiter)
	ctx := context.Background()
	before := redisNow(t, c)
	if err := w.Adapt(ctx, throttle.Feedback{HasRemaining: true, Remaining: 4, Reset: 2 * time.Second}); err != nil {
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
	if float64(turns[0]) > after+200e3 {
		t.Errorf("the first turn came at Adapt+%.1fms; want at once (a round trip, ≤ 200ms on a loaded machine)", (float64(turns[0])-before)/1e3)
	}
	// The spread is anchored at the Adapt's TIME, between before and
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

// cutRate is the cut's pace at t (µs), as schedule.go states it for a
// key with a limit: r0 right after the cut at ac, regrowing to wMax over
// 2 s in steps of 250ms, never below floor.
func cutRate(r0, wMax, floor, ac, t float64) float64 {
	d := math.Floor((t-ac)/250e3) * 0.25
	if d >= 2 {
		return wMax
	}
	return max(r0+(wMax-r0)*d/2, floor)
}

// TestAdaptiveFleet: worker B waits in a loop on a quota of 100/s (burst
// 1); worker A (another Quota, another client) reports bare rejections.
// Turns are on Redis's clock and each is computed from the state, so the
// bounds are exact where B keeps up (a wait is one loopback round trip,
// well under the 10ms interval):
//
//   - Before: turns 10ms apart (≥ 10ms exactly; mean ≤ 11ms).
//   - A first rejection under the configured limit only shifts B's
//     schedule by 2 intervals: one gap of ≥ 20ms, no cut written.
//   - A second within 10 s cuts to 0.7 of the configured rate (a
//     fraction of a rate that means something, not one read from state),
//     regrowing to it in steps over 2 s: every later spacing is at least
//     the step's interval at its turn. Over the first 300ms, B gets at most
//     the steps' integral plus 2 for rounding at the ends.
//   - A rejection of a request sent before the cut (Age 1 s) is ignored:
//     the cut's fields are unchanged.
func TestAdaptiveFleet(t *testing.T) {
	t.Parallel()
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
	if r0, _ := hashFloat(t, c1, a.rkey, "c0"); r0 != 0 {
		t.Errorf("a lone rejection under the configured limit cut the pace to %.1f/s; want only a shift", r0)
	}
	if cl, ok := hashFloat(t, c1, a.rkey, "cl"); !ok || cl < shiftAt {
		t.Errorf("after a lone rejection, cl = %.0f, %v; want the shift's time ≥ %.0f", cl, ok, shiftAt)
	}

	// Rejections within 10 s trim the pace (see trimStep in schedule.go)
	// up to trimMax; the one past it cuts.
	time.Sleep(200 * time.Millisecond)
	for i := range 10 {
		if err := a.Adapt(ctx, rejected); err != nil {
			t.Fatalf("Adapt(throttled) %d = %v", i+2, err)
		}
		if i < 9 {
			if r0, _ := hashFloat(t, c1, a.rkey, "c0"); r0 != 0 {
				t.Fatalf("rejection %d within the margin cut the pace to %.1f/s; want a trim", i+2, r0)
			}
		}
	}
	r0, ok0 := hashFloat(t, c1, a.rkey, "c0")
	wMax, _ := hashFloat(t, c1, a.rkey, "cw")
	floor, _ := hashFloat(t, c1, a.rkey, "cf")
	ac, okc := hashFloat(t, c1, a.rkey, "ca")
	if !ok0 || !okc || r0 == 0 {
		t.Fatalf("the rejection past the margin did not cut (c0 %v, ca %v)", r0, okc)
	}
	if r0 != 70 || wMax != 100 || floor != 25 {
		t.Errorf("cut to %.1f/s regrowing to %.1f/s, floor %.1f; want 70 (0.7 of the limit), 100, 25", r0, wMax, floor)
	}

	// In flight before the cut: ignored.
	if err := a.Adapt(ctx, throttle.Feedback{Throttled: true, Age: time.Second}); err != nil {
		t.Fatalf("Adapt(throttled, Age 1s) = %v", err)
	}
	r02, _ := hashFloat(t, c1, a.rkey, "c0")
	ac2, _ := hashFloat(t, c1, a.rkey, "ca")
	if r02 != r0 || ac2 != ac {
		t.Errorf("a rejection of a request sent before the cut changed it: %.1f → %.1f/s, cut at %.0f → %.0f; want ignored", r0, r02, ac, ac2)
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
		// A unit is charged at the pace in force when it goes: the unit
		// that goes first in a new (faster) step was given its turn at
		// the step before, so the spacing after it may fall short of the
		// new step's interval by the difference of the two steps'.
		want := 1e6 / cutRate(r0, wMax, floor, ac, float64(turns[i+1]))
		want -= 1e6/cutRate(r0, wMax, floor, ac, float64(turns[i+1])-250e3) - want
		if d < want-2 {
			t.Errorf("after the cut, turn at cut+%.1fms was followed after %.2fms; want ≥ %.2fms (the curve)", (float64(turns[i])-ac)/1e3, d/1e3, want/1e3)
		}
	}
	for _, turn := range turns {
		if float64(turn) >= ac && float64(turn) < ac+300e3 {
			inFirst++
		}
	}
	// The steps' integral over 300ms: 250ms at 70/s, 50ms at 73.75/s.
	integral := 0.25*cutRate(r0, wMax, floor, 0, 0) + 0.05*cutRate(r0, wMax, floor, 0, 250e3)
	t.Logf("before: %d spacings, mean %.2fms; shift gap %.2fms; cut to %.1f/s: %d turns in the next 300ms (steps: %.1f), spacing mean %.2fms over %d",
		len(gaps), mean(gaps)/1e3, longest/1e3, r0, inFirst, integral, mean(after)/1e3, len(after))
	if lim := int(integral) + 2; inFirst > lim {
		t.Errorf("%d turns in the 300ms after the cut; want ≤ %d (the steps' integral + 2)", inFirst, lim)
	}
	if len(after) > 0 && after[0] < 1e6/(0.7*100)-2 {
		t.Errorf("first spacing after the cut %.2fms; want ≥ 14.3ms (1/(0.7·100/s))", after[0]/1e3)
	}
}
