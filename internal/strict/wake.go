package strict

import (
	"math"

	"github.com/throttle-go/throttle/internal/schedule"
)

// Wake-ups. The next request is late too: its wait wakes after its turn
// (Go's netpoller waits in whole milliseconds on Linux, and a busy
// machine adds its scheduling), and the anchor counts the lateness of the
// request before in full. So the anchor moves the next turn sooner by the
// lateness that the key's wake-ups exceed 19 times in 20 (wakeShare), at
// most anchorMax of an interval; it still only moves turns later.
//
// And a wait that wakes late sends late: where a key's timers fire late by
// more than spinShare of an interval, a wait on an anchored key sets its
// timer early by twice that lateness (at most anchorMax of an interval)
// and yields the processor from then until its turn (SpinLead). A
// bubble's timers fire on time: there a wait never spins.

const (
	// WakeShare: the share of wake-ups later than the estimate.
	WakeShare = 0.05
	// WakeStep: how far the estimate moves a wake-up, in intervals.
	WakeStep = 0.005
	// SpinShare: timers later than this share of an interval make waits
	// on an anchored key spin.
	SpinShare = 0.005
	// lateStep: the weight of a firing in the timers' lateness.
	lateStep = 1.0 / 16
)

// wakeLag is a key's estimate of the wake-up lateness its waits exceed
// but wakeShare of the time (a quantile, by stochastic approximation: it
// moves down by wakeStep·(1 − wakeShare) of an interval for a wake-up no
// later than it, up by wakeStep·wakeShare otherwise).
type wakeLag float64

// timerLate is how late a key's timers fire after their time (an
// exponentially weighted mean, lateStep a firing).
type timerLate float64

// Woke counts a wait that woke d after its turn, on a key paced at
// interval. A nanosecond late is on time: a wait sleeps until its turn
// rounded up to the nanosecond.
func (k *Key) Woke(d, interval, sec float64) {
	w := &k.wake
	if interval <= 0 || math.IsInf(interval, 0) || d < 0 {
		return
	}
	step := WakeStep * interval
	if d <= float64(*w)+1e-9*sec {
		*w = wakeLag(max(float64(*w)-step*(1-WakeShare), 0))
	} else {
		*w = wakeLag(min(float64(*w)+step*WakeShare, AnchorMax*interval))
	}
}

// Fired counts a timer that fired d after its time.
func (k *Key) Fired(d float64) {
	k.late += timerLate(lateStep * (max(d, 0) - float64(k.late)))
}

// SpinLead returns how long before its turn a wait on the key should stop
// sleeping and spin, 0 for not at all.
func (k *Key) SpinLead(s *schedule.State, now float64, c schedule.Config) float64 {
	iv := interval(s, now, c)
	late := float64(k.late)
	if late <= SpinShare*iv || !k.anchored(s, now, c) {
		return 0
	}
	return min(2*late, AnchorMax*iv)
}

// Assume sets the key's estimates as if its timers had fired late late,
// and its waits had woken wake late, 19 times in 20.
func (k *Key) Assume(late, wake float64) {
	k.late, k.wake = timerLate(late), wakeLag(wake)
}

// Late returns how late the key's timers fire after their time, on
// average.
func (k *Key) Late() float64 { return float64(k.late) }
