package throttle

import (
	"context"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/throttle-go/throttle/internal/schedule"
	"github.com/throttle-go/throttle/internal/strict"
)

// TestCutPaceIsTheCutRate: a cut to r a second spaces units by 1/r, not
// more. With burst 1 at 10/s the bucket is 100ms deep, shallower than the
// cut's interval (1/7 s): a bucket that deep spaced units by 2/r − 100ms
// (186ms instead of 143ms, a pace of 5.4/s where the cut said 7/s).
func TestCutPaceIsTheCutRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limit: 10, Burst: 1}
		ctx := context.Background()
		// Bare rejections trim the pace to trimMax (see trimStep); the one
		// past it cuts to schedule.CutBeta·10/s.
		adapt(l, "k", Feedback{Throttled: true})
		time.Sleep(time.Second)
		for cutRate(l.bucket("k")) == 0 {
			adapt(l, "k", Feedback{Throttled: true})
		}
		cutAt := time.Now()
		const n = 12
		var got [n]time.Duration
		for i := range n {
			if err := l.For("k").WaitN(ctx, 1); err != nil {
				t.Fatal(err)
			}
			got[i] = time.Since(cutAt)
		}
		// The cut's pace at d after it: schedule.CutBeta·10 regrowing to 10 in
		// steps of schedule.CutStep over schedule.CutRecover.
		rateAt := func(d time.Duration) float64 {
			steps := math.Floor(d.Seconds() / schedule.CutStep)
			if steps*schedule.CutStep >= schedule.CutRecover {
				return 10
			}
			r0 := schedule.CutBeta * 10
			return r0 + (10-r0)*steps*schedule.CutStep/schedule.CutRecover
		}
		for i := 1; i < n; i++ {
			gap := got[i] - got[i-1]
			// Never faster than the pace at the later unit, never slower
			// than the pace at the earlier one (the pace only regrows);
			// 1µs for the rounding of sleeps to whole nanoseconds.
			lo := time.Duration(float64(time.Second)/rateAt(got[i])) - time.Microsecond
			hi := time.Duration(float64(time.Second)/rateAt(got[i-1])) + time.Microsecond
			if gap < lo || gap > hi {
				t.Errorf("unit %d went %v after unit %d (at %v); want between %v and %v (the cut's pace)", i, gap, i-1, got[i], lo, hi)
			}
		}
	})
}

// cutRate returns the pace of the cut in force on b's key, units a
// second; 0 for none.
func cutRate(b *bucket) float64 {
	var r float64
	b.k().Inspect(func(now float64, s *schedule.State, c schedule.Config, _ *strict.Key) {
		r = s.CutRate(now, c)
	})
	return r
}
