package strict

import (
	"math"
	"testing"
)

// TestWakeLag checks the estimate of the wake-up lateness a key's waits
// exceed but WakeShare of the time: fed wake-ups spread evenly over 0 to
// 1.98 ms (its quantile at WakeShare 0.1 ms), it rests within a step
// (WakeStep of the 20 ms interval, 0.1 ms) of it; fed wake-ups all on
// time, it stays at 0.
func TestWakeLag(t *testing.T) {
	const interval = 20e6 // ns
	var k Key
	sum, n := 0.0, 0
	for i := range 4000 {
		k.Woke(float64((i*37)%100)*20e3, interval, 1e9)
		if i >= 2000 {
			sum += float64(k.wake)
			n++
		}
	}
	if mean, want, step := sum/float64(n), 0.1e6, WakeStep*interval; math.Abs(mean-want) > step {
		t.Errorf("resting at %.3f ms on average; want %.3f ms ± %.3f ms", mean/1e6, want/1e6, step/1e6)
	}
	var on Key
	for range 1000 {
		on.Woke(0, interval, 1e9)
	}
	if on.wake != 0 {
		t.Errorf("wake-ups on time: %v; want 0", float64(on.wake))
	}
}

// TestTimerLate checks the mean of timer lateness: it follows a constant
// lateness to within 1% in 100 firings (a step of 1/16) and takes early
// firings as on time.
func TestTimerLate(t *testing.T) {
	var k Key
	for range 100 {
		k.Fired(800e3)
	}
	if math.Abs(k.Late()-800e3) > 8e3 {
		t.Errorf("after 100 firings 0.8 ms late: %.1f µs; want 800 ± 8", k.Late()/1e3)
	}
	for range 100 {
		k.Fired(-1e6)
	}
	if k.Late() > 8e3 {
		t.Errorf("after 100 firings early: %.1f µs; want ≤ 8 (on time)", k.Late()/1e3)
	}
}
