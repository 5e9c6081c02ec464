package throttle

import "math"

// The schedule's operations (see schedule.go): enqueue, cancel, pause,
// what servers say, try, and the read-only view.

// enqueue gives a ticket of n units in queue qi at now, after advance,
// and reports whether the turns of the waits queued before it moved.
func (s *schedule) enqueue(now float64, c pacing, qi int, n int64) (e int64, moved bool) {
	if s.queued() == 0 {
		// GCRA: a bucket refills to its burst and no further; a window's
		// probes do not bank time either.
		s.tat = max(s.tat, now)
		if w := &s.win; w.valid && w.left == 0 && now >= w.probeAt+math.Ceil(w.probed/s.probe(c))*probeWait*c.sec {
			w.probeAt, w.probed = now, 0
		}
	}
	if float64(n) > s.maxCost {
		// A larger probe moves the turns of the waits past a window, and
		// a cut's bucket is a request deep (see pace): the bucket's units
		// are kept across the change (rescale), and the turns move.
		moved = (s.win.valid || s.cut.r0 != 0) && s.queued() > 0
		s.maxCost = float64(n)
		s.rescale(now, c)
	}
	return s.q[qi].take(n), moved
}

// cancel gives back the ticket (qi, e) of n units at now, after advance.
// It reports whether the ticket had not gone (so its units came back).
func (s *schedule) cancel(now float64, qi int, e, n int64) bool {
	if e <= s.q[qi].rel {
		return false
	}
	if s.x != nil {
		live := s.q[qi].live()
		s.q[qi].cancel(e, n)
		s.x.cancel(now, qi, e, s.q[qi].live() == live)
		return true
	}
	s.q[qi].cancel(e, n)
	return true
}

// pause holds everything until until, after advance. It reports whether
// the hold moved (a pause never shortens a longer one).
func (s *schedule) pause(until float64) bool {
	if until <= s.hold {
		return false
	}
	s.hold = until
	return true
}

// reject applies a bare rejection at now of a request of cost units that
// went at sentAt. It reports whether the schedule moved.
func (s *schedule) reject(now, sentAt, cost float64, c pacing) bool {
	if s.cut.moved && sentAt < s.cut.last {
		return false // in flight before the last change
	}
	interval, _ := s.base(c)
	cur := s.cut.rate(now, c.sec)
	if interval > 0 && cur == 0 && (!s.cut.moved || now-s.cut.last > strikeWindow*c.sec || s.trim+trimStep <= trimMax+1e-9) {
		// A lone rejection, or one the margin still has room for: shift
		// and trim (see trimStep).
		s.tat = max(s.tat, now) + shiftSlots*interval
		s.cut.last, s.cut.moved = now, true
		s.trim, s.trimGone = min(s.trim+trimStep, trimMax), 0
		s.rescale(now, c)
		return true
	}
	// A key with a limit is cut to a fraction of it (of the pace in force,
	// for a cut that follows another) and regrows to it; never below a
	// quarter of it. A key without one is cut to a fraction of what it was
	// sending (of the cut's pace, if less), regrows to that, then probes
	// beyond it; never below a request a second.
	least := cutMinRequests * max(cost, 1)
	var from, wMax, floor float64
	if interval > 0 {
		limit := c.sec / (interval * (1 - s.trim)) // the limit, untrimmed
		wMax, from, floor = limit, limit, min(max(least, cutFloor*limit), limit)
		if cur > 0 {
			from = cur
		}
	} else {
		from = s.sentRate(now, c.sec)
		if cur > 0 {
			from = min(from, cur)
		}
		from = max(from, least)
		wMax, floor = from, least
	}
	s.cut = cut{r0: max(cutBeta*from, floor), wMax: wMax, floor: floor, at: now, open: interval == 0, last: now, moved: true}
	s.trim, s.trimGone = 0, 0 // the cut, which regrows, replaces it
	s.rescale(now, c)         // the bucket's units at the old pace, from now on at the new
	return true
}

// refused applies, after advance and the pause, a refusal at now that
// said when to come back (a 429 with Retry-After): under a known limit,
// with no cut in force, it trims the pace a step as a bare rejection does
// (see trimStep), without the shift (the pause holds the key). A strict
// server bucket that refuses what dispatch jitter brings early (Retry-
// After: 1 for a token a millisecond away) has no slack left after the
// pause either: both buckets start full, and the first burst empties
// both. The trim gives it the slack it needs, where the pause alone let
// the next jitter refuse again (a bucket of 100/s, burst 10, ≤ 1 ms of
// jitter: a second's pause 34 times in 2,000 requests). It reports
// whether the pace changed.
func (s *schedule) refused(now float64, c pacing) bool {
	interval, _ := s.base(c)
	if interval == 0 || s.cut.rate(now, c.sec) > 0 || s.trim+trimStep > trimMax+1e-9 {
		return false
	}
	s.cut.last, s.cut.moved = now, true
	s.trim, s.trimGone = min(s.trim+trimStep, trimMax), 0
	s.rescale(now, c)
	return true
}

// sentRate returns the units a second the key sent over the last second,
// or over the time it has been sending if that is shorter.
func (s *schedule) sentRate(now, sec float64) float64 {
	w := s.sent(now, sec)
	if span := now - s.busySince; span < sec {
		w = w * sec / max(span, 0.01*sec)
	}
	return w
}

// adapt applies a window at now (see window.update).
//
// The units in flight are those gone whose responses have not come, but
// no more than went over the last second or two: a caller that does not
// report every response (Transport reports to a shared quota only the
// responses that say something) would otherwise leave them counted.
func (s *schedule) window(now, left, reset, size, length float64, c pacing) {
	s.x.moved(now)
	s.hb = budget{} // a window the server states: no hidden budget
	s.forget()
	s.win.update(now, left, reset, size, length, min(s.pending, s.sent(now, c.sec)), c.sec)
}

// declare adopts a server's declared pace at now, after advance.
func (s *schedule) declare(now float64, c pacing, interval, burst float64) {
	s.dInt, s.dBurst = interval, burst
	s.rescale(now, c) // the bucket's units at the old pace, from now on at the new
}

// level caps the bucket at now, after advance, to avail units at once: a
// server's bucket that refills continuously holds avail units (as it
// counted them: the units in flight it has not counted yet are taken off),
// so no more may go before it refills, at the pace in force. tat moves
// later only (a bucket the server says is fuller than ours gives no
// units: ours may know of units the server has not counted). It reports
// whether tat moved.
func (s *schedule) level(now float64, c pacing, avail float64) bool {
	interval, tau := s.pace(now, c)
	if interval <= 0 || math.IsInf(interval, 0) {
		return false
	}
	avail = math.Floor(max(avail-s.pending, 0))
	t := now + tau - avail*interval
	if t <= s.tat {
		return false
	}
	s.tat = t
	return true
}

// answered counts a response to n units that went.
func (s *schedule) answered(n float64) {
	s.pending = max(s.pending-n, 0)
}

// idle reports whether the state at now is that of a new key, so that
// forgetting it loses nothing: a full bucket, nothing queued, held, cut or
// windowed. A declared pace is not kept for an idle key: the next response
// declares it again.
func (s *schedule) idle(now float64, c pacing) bool {
	return s.queued() == 0 && s.tat <= now && s.hold <= now && s.cut.rate(now, c.sec) == 0 &&
		(!s.cut.moved || now-s.cut.last > strikeWindow*c.sec) && !s.win.valid &&
		(s.trim == 0 || now-s.cut.last > trimKeep*c.sec) && (s.x == nil || s.x.idle(now)) &&
		(!s.hb.on || now-s.hb.at > hiddenKeep*c.sec)
}

// recheck returns when a sleeping wait must look at its turn again
// without being told: the cut's next step, when it regrows; +Inf if never.
func (s *schedule) recheck(now float64, c pacing) float64 {
	return s.cut.nextStep(now, c.sec)
}

// try lets a wait of n units in queue qi go at now if its turn has come,
// by the rules of a wait (goNow, or enqueue, turn and advance), and
// otherwise changes nothing. It reports whether the units went and, if
// not, the turn a wait of n would have had. It requires advance at now.
// cost is the wait's cost in the key's further limits (nil if none).
func (s *schedule) try(now float64, c pacing, qi int, n int64, cost []float64) (bool, float64) {
	if s.goNowX(now, c, qi, n, cost) {
		return true, now
	}
	// The state as it was, to put back: enqueue may change more than the
	// queue (the largest cost, and with it a cut's depth and the bucket's
	// units: see rescale). The copy shares the lines' slices, which
	// enqueue and advance only append to or reslice.
	saved := *s
	xs := s.x.save()
	e, _ := s.enqueueX(now, c, qi, n, cost)
	t := s.turn(now, c, qi, e)
	if t <= now {
		s.advance(now, c) // lets the ticket go
		if e <= s.q[qi].rel {
			return true, now
		}
	}
	*s = saved
	s.x.restore(xs)
	return false, t
}

// view is a key's state at now as callers see it (see State), in schedule
// units; it requires advance at now and changes nothing.
type view struct {
	tokens    float64 // the bucket's units less those queued (+Inf: no pace)
	remaining float64 // units waits of one unit each could take at once
	next      float64 // the turn of a wait of one unit
	queued    float64
	interval  float64 // the pace in force; 0 for none
	burst     float64 // the bucket's depth in units at that pace
	cut       bool
	declared  bool
}

// view returns the key's state at now.
func (s *schedule) view(now float64, c pacing) view {
	interval, tau := s.pace(now, c)
	v := view{
		queued:   float64(s.queued()),
		interval: interval,
		cut:      (s.cut.rate(now, c.sec) > 0 || s.trim > 0) && interval > 0,
		declared: c.interval == 0 && s.dInt > 0,
		tokens:   math.Inf(1),
	}
	if interval > 0 {
		v.burst = tau / interval
		// GCRA: the bucket holds (now − tat + τ)/interval units, at most
		// its depth; queued tickets have not moved tat yet.
		v.tokens = min(max((now-max(s.tat, s.hold)+tau)/interval, 0), v.burst) - v.queued
	}
	v.next = s.turnAt(now, c, v.queued+1)
	// remaining: the most units past the head whose turns have come, as
	// advance counts them (turns grow with the position), bounded by what
	// the bucket or the window can hold.
	limit := math.Inf(1)
	if interval > 0 {
		limit = math.Floor(v.burst + 1e-9)
	}
	if s.win.valid {
		limit = min(limit, s.win.left+s.probe(c))
	}
	if v.queued > 0 || now < s.hold {
		return v // advance let go every unit whose turn had come
	}
	if math.IsInf(limit, 1) {
		v.remaining = limit
		return v
	}
	v.remaining = s.dueUnits(now, c, limit)
	return v
}
