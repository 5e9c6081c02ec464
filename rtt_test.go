package throttle

import (
	"testing"
	"time"
)

// TestRoundTrips checks the estimate: the fastest of the current and the
// previous period, forgotten after two.
func TestRoundTrips(t *testing.T) {
	var r roundTrips
	t0 := time.Unix(1000*int64(rttPeriod/time.Second), 0) // a period's start
	steps := []struct {
		at      time.Duration // since t0
		observe time.Duration // 0: none
		want    time.Duration
	}{
		{0, 0, 0},
		{0, 300 * time.Millisecond, 300 * time.Millisecond},
		{time.Second, 100 * time.Millisecond, 100 * time.Millisecond},
		{2 * time.Second, 200 * time.Millisecond, 100 * time.Millisecond},
		{rttPeriod, 0, 100 * time.Millisecond},                                    // the previous period's
		{rttPeriod + time.Second, 400 * time.Millisecond, 100 * time.Millisecond}, // still
		{2 * rttPeriod, 0, 400 * time.Millisecond},                                // the first period forgotten
		{5 * rttPeriod, 0, 0}, // all forgotten
	}
	for _, s := range steps {
		now := t0.Add(s.at)
		if s.observe > 0 {
			r.observe(now, s.observe)
		}
		if got := r.estimate(now); got != s.want {
			t.Errorf("at %v after observing %v: estimate %v; want %v", s.at, s.observe, got, s.want)
		}
	}
}
