package distributed

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttle-go/throttle"
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

// TestObserveNothing: a Feedback that says nothing makes no Redis call.
func TestObserveNothing(t *testing.T) {
	c := newClient(t, "127.0.0.1:1") // nothing listens: any call would fail
	q := New(c, "adapt-nothing", throttle.Limit{Rate: 10, Burst: 1})
	q.FailMode = FailClosed
	if _, err := q.For("k").Observe(context.Background(), throttle.Feedback{Age: time.Second}); err != nil {
		t.Errorf("Observe(empty Feedback) = %v; want nil without a call", err)
	}
	if q.br.failures != 0 {
		t.Errorf("Observe(empty Feedback) reached the store (%d failures)", q.br.failures)
	}
}

// TestObserveOutage: during an outage, Observe neither blocks nor fails for
// advice (a window, a rejection); a pause that could not be written is
// reported as ErrStoreUnavailable, as Pause does, so that Transport does
// not report a pause that did not happen.
func TestObserveOutage(t *testing.T) {
	c := newClient(t, "127.0.0.1:1")
	q := New(c, "adapt-outage", throttle.Limit{Rate: 10, Burst: 1})
	w := q.For("k")
	ctx := context.Background()
	start := time.Now()
	if _, err := w.Observe(ctx, throttle.Feedback{Verdict: throttle.RefusedBare, Window: &throttle.ServerWindow{Remaining: 3, Reset: time.Second}}); err != nil {
		t.Errorf("Observe(window, throttled) during an outage = %v; want nil", err)
	}
	if _, err := w.Observe(ctx, throttle.Feedback{Pause: time.Second}); !errors.Is(err, ErrStoreUnavailable) {
		t.Errorf("Observe(pause) during an outage = %v; want ErrStoreUnavailable", err)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("two Observe calls during an outage took %v; want each bounded by Timeout (50ms)", d)
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
// 1); worker A (another Limiter, another client) reports bare rejections.
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
	qa, qb := New(c1, "adaptive-fleet", throttle.Limit{Rate: 100, Burst: 1}), New(c2, "adaptive-fleet", throttle.Limit{Rate: 100, Burst: 1})
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
	rejected := throttle.Feedback{Verdict: throttle.RefusedBare}

	time.Sleep(1200 * time.Millisecond)
	shiftAt := redisNow(t, c1)
	if _, err := a.Observe(ctx, rejected); err != nil {
		t.Fatalf("Observe(throttled) = %v", err)
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
		if _, err := a.Observe(ctx, rejected); err != nil {
			t.Fatalf("Observe(throttled) %d = %v", i+2, err)
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
	if _, err := a.Observe(ctx, throttle.Feedback{Verdict: throttle.RefusedBare, Age: time.Second}); err != nil {
		t.Fatalf("Observe(throttled, Age 1s) = %v", err)
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
