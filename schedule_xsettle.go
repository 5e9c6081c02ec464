package throttle

import "math"

// Costs settled in the further limits (schedule_limits.go): the rule of
// settle (schedule_settle.go) for each limit a unit has, the script's
// op msettle being the other side. A wait spent its estimate in each
// unit; its actual cost amends each limit by d = actual − spent, at the
// settle (a limit keeps no receipt of when the wait went):
//
//   - a bucket: tat moves by d·interval from GCRA's floor (max(tat,
//     now)), then meets the floor again: a charge is a debt the next
//     waits pay, a give-back never leaves more than the burst;
//   - a window: a charge counts d more units in now's window (past q if
//     need be: the waits of that window then go in the next one, and a
//     sliding window carries it on as the window before); a give-back
//     takes up to −d units off now's window's count, never below zero,
//     and only if units went in now's window (if the last went in an
//     earlier window, that window is over or counts as the one before,
//     whose units a give-back does not refill, as the schedule's server
//     window is not refilled: the units may have gone in it).
//
// Queued tickets are not in the limits' state (their units are taken in
// the walk, at their turns), so amending the state moves every queued
// turn, and the floor (moved) keeps a ticket moved earlier from
// claiming credit from before the settle.

// settle amends the limit at now by d units (see above).
func (l *xlimit) settle(now, d float64) {
	if l.kind == xBucket {
		if l.interval > 0 {
			l.tat = max(max(l.tat, now)+d*l.interval, now)
		}
		return
	}
	i := math.Floor((now + l.off) / l.w)
	if d > 0 {
		l.take(now, d)
		return
	}
	if i == l.idx {
		l.cur = max(l.cur+d, 0)
	}
}

// settle amends the further limits at now by d, per limit (actual −
// spent). It reports whether queued turns moved, so that their sleepers
// ask again. nil-safe.
func (x *extras) settle(now float64, d []float64) bool {
	if x == nil {
		return false
	}
	any := false
	for i := range x.lim {
		if d[i] != 0 && x.lim[i].limits() {
			x.lim[i].settle(now, d[i])
			any = true
		}
	}
	if !any {
		return false
	}
	x.moved(now)
	return x.q[0].len()+x.q[1].len() > 0
}
