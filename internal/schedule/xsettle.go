package schedule

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
//     window is not refilled: the units may have gone in it); a window
//     aligned to first use likewise, in its current window, a charge
//     after its end starting the next (it is a use);
//   - a sliding log: a charge is d units gone at now (the log may then
//     count more than q: the waits behind go once enough have left); a
//     give-back takes up to −d units off the newest entries still inside
//     (now − w, now]. Taking them off the newest, not the wait's own
//     (the log keeps no receipt), frees no interval that does not hold
//     now: any later turn's interval that holds a unit taken off holds
//     now too, so a give-back counts as −d units at now, as a window's.
//
// Queued tickets are not in the limits' state (their units are taken in
// the walk, at their turns), so amending the state moves every queued
// turn, and the floor (moved) keeps a ticket moved earlier from
// claiming credit from before the settle.

// settle amends the limit at now by d units (see above).
func (l *Limit) settle(now, d float64) {
	if l.kind == KindBucket {
		if l.interval > 0 {
			l.tat = max(max(l.tat, now)+d*l.interval, now)
		}
		return
	}
	if l.kind == KindLog {
		if d > 0 {
			l.logTake(now, d)
			return
		}
		log := append([]logEntry(nil), l.log...)
		for j := len(log) - 1; j >= 0 && d < 0 && log[j].t+l.w > now; j-- {
			g := min(log[j].c, -d)
			log[j].c -= g
			d += g
		}
		k := 0 // drop the entries left empty
		for _, e := range log {
			if e.c > 0 {
				log[k] = e
				k++
			}
		}
		l.log = log[:k]
		return
	}
	if l.kind == KindFirst {
		switch {
		case d > 0:
			l.take(now, d) // a use: past the window's end, it starts one
		case now < l.start+l.w:
			l.cur = max(l.cur+d, 0)
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
	for qi := range x.q {
		if x.q[qi].len() > 0 {
			return true
		}
	}
	return false
}

// SettleLimits amends the further limits at now by d, per limit (actual −
// spent), after Advance. It reports whether queued turns moved.
func (s *State) SettleLimits(now float64, d []float64) bool {
	return s.x.settle(now, d)
}
