package schedule

import "math"

// The schedule's operations (see schedule.go): enqueue, cancel, pause,
// what servers say, try, and the read-only view.

// enqueue gives a ticket of n units in queue qi at now, after advance,
// and reports whether the turns of the waits queued before it moved.
func (s *State) enqueue(now float64, c Config, qi int, n int64) (e int64, moved bool) {
	if s.Queued() == 0 {
		// GCRA: a bucket refills to its burst and no further; a window's
		// probes do not bank time either.
		s.tat = max(s.tat, now)
		if w := &s.win; w.valid && w.left == 0 && now >= w.probeAt+math.Ceil(w.probed/s.probe(c))*probeWait*c.Sec {
			w.probeAt, w.probed = now, 0
		}
	}
	if float64(n) > s.maxCost {
		// A larger probe moves the turns of the waits past a window, and
		// a cut's bucket is a request deep (see pace): the bucket's units
		// are kept across the change (rescale), and the turns move.
		moved = (s.win.valid || s.cut.r0 != 0) && s.Queued() > 0
		s.maxCost = float64(n)
		s.rescale(now, c)
	}
	s.enterClass(qi)
	return s.q[qi].take(n), moved
}

// Cancel gives back the ticket (qi, e) of n units at now, after advance.
// It reports whether the ticket had not gone (so its units came back).
func (s *State) Cancel(now float64, qi int, e, n int64) bool {
	if e <= s.q[qi].rel {
		return false
	}
	if s.x != nil {
		live := s.q[qi].live()
		s.q[qi].cancel(e, n)
		s.x.cancel(now, qi, e, s.q[qi].live() == live)
	} else {
		s.q[qi].cancel(e, n)
	}
	s.tidyClasses()
	return true
}

// Pause holds everything until until, after advance. It reports whether
// the hold moved (a Pause never shortens a longer one).
func (s *State) Pause(until float64) bool {
	if until <= s.hold {
		return false
	}
	s.hold = until
	return true
}

// Reject applies a bare rejection at now of a request of cost units that
// went at sentAt. It reports whether the schedule moved.
func (s *State) Reject(now, sentAt, cost float64, c Config) bool {
	if s.cut.moved && sentAt < s.cut.last {
		return false // in flight before the last change
	}
	interval, _ := s.Base(c)
	cur := s.cut.rate(now, c.Sec)
	if interval > 0 && cur == 0 && (!s.cut.moved || now-s.cut.last > strikeWindow*c.Sec || s.trim+TrimStep <= TrimMax+1e-9) {
		// A lone rejection, or one the margin still has room for: shift
		// and trim (see trimStep).
		s.tat = max(s.tat, now) + shiftSlots*interval
		s.cut.last, s.cut.moved = now, true
		s.trim, s.trimGone = min(s.trim+TrimStep, TrimMax), 0
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
		limit := c.Sec / (interval * (1 - s.trim)) // the limit, untrimmed
		wMax, from, floor = limit, limit, min(max(least, cutFloor*limit), limit)
		if cur > 0 {
			from = cur
		}
	} else {
		from = s.sentRate(now, c.Sec)
		if cur > 0 {
			from = min(from, cur)
		}
		from = max(from, least)
		wMax, floor = from, least
	}
	s.cut = cut{r0: max(CutBeta*from, floor), wMax: wMax, floor: floor, at: now, open: interval == 0, last: now, moved: true}
	s.trim, s.trimGone = 0, 0 // the cut, which regrows, replaces it
	s.rescale(now, c)         // the bucket's units at the old pace, from now on at the new
	return true
}

// Refused applies, after advance and the pause, a refusal at now that
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
func (s *State) Refused(now float64, c Config) bool {
	interval, _ := s.Base(c)
	if interval == 0 || s.cut.rate(now, c.Sec) > 0 || s.trim+TrimStep > TrimMax+1e-9 {
		return false
	}
	s.cut.last, s.cut.moved = now, true
	s.trim, s.trimGone = min(s.trim+TrimStep, TrimMax), 0
	s.rescale(now, c)
	return true
}

// sentRate returns the units a second the key sent over the last second,
// or over the time it has been sending if that is shorter.
func (s *State) sentRate(now, sec float64) float64 {
	w := s.sent(now, sec)
	if span := now - s.busySince; span < sec {
		w = w * sec / max(span, 0.01*sec)
	}
	return w
}

// adapt applies a Window at now (see Window.update).
//
// The units in flight are those gone whose responses have not come, but
// no more than went over the last second or two: a caller that does not
// report every response (Transport reports to a shared quota only the
// responses that say something) would otherwise leave them counted.
func (s *State) Window(now, left, reset, size, length float64, c Config) {
	s.x.moved(now)
	s.hb = budget{} // a window the server states: no hidden budget
	s.forget()
	s.win.update(now, left, reset, size, length, min(s.pending, s.sent(now, c.Sec)), c.Sec)
}

// Declare adopts a server's declared pace at now, after advance.
func (s *State) Declare(now float64, c Config, interval, burst float64) {
	s.dInt, s.dBurst = interval, burst
	s.rescale(now, c) // the bucket's units at the old pace, from now on at the new
}

// Level caps the bucket at now, after advance, to avail units at once: a
// server's bucket that refills continuously holds avail units (as it
// counted them: the units in flight it has not counted yet are taken off),
// so no more may go before it refills, at the pace in force. tat moves
// later only (a bucket the server says is fuller than ours gives no
// units: ours may know of units the server has not counted). It reports
// whether tat moved.
func (s *State) Level(now float64, c Config, avail float64) bool {
	interval, tau := s.Pace(now, c)
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

// Answered counts a response to n units that went.
func (s *State) Answered(n float64) {
	s.pending = max(s.pending-n, 0)
}

// Idle reports whether the state at now is that of a new key, so that
// forgetting it loses nothing: a full bucket, nothing queued, held, cut or
// windowed. A declared pace is not kept for an Idle key: the next response
// declares it again.
func (s *State) Idle(now float64, c Config) bool {
	return s.Queued() == 0 && s.tat <= now && s.hold <= now && s.cut.rate(now, c.Sec) == 0 &&
		(!s.cut.moved || now-s.cut.last > strikeWindow*c.Sec) && !s.win.valid &&
		(s.trim == 0 || now-s.cut.last > TrimKeep*c.Sec) && (s.x == nil || s.x.idle(now)) &&
		(!s.hb.on || now-s.hb.at > hiddenKeep*c.Sec)
}

// Recheck returns when a sleeping wait must look at its turn again
// without being told: the cut's next step, when it regrows; +Inf if never.
func (s *State) Recheck(now float64, c Config) float64 {
	return s.cut.nextStep(now, c.Sec)
}

// Try lets a wait of n units in queue qi go at now if its turn has come,
// by the rules of a wait (goNow, or enqueue, turn and advance), and
// otherwise changes nothing. It reports whether the units went and, if
// not, the turn a wait of n would have had. It requires advance at now.
// cost is the wait's cost in the key's further limits (nil if none).
func (s *State) Try(now float64, c Config, qi int, n int64, cost []float64) (bool, float64) {
	if _, ok := s.GoNow(now, c, qi, n, cost); ok {
		return true, now
	}
	// The state as it was, to put back: enqueue may change more than the
	// queue (the largest cost, and with it a cut's depth and the bucket's
	// units: see rescale). The copy shares the lines' slices, which
	// enqueue and advance only append to or reslice.
	saved := *s
	xs := s.x.save()
	e, _ := s.Enqueue(now, c, qi, n, cost)
	t := s.Turn(now, c, qi, e)
	if t <= now {
		s.Advance(now, c) // lets the ticket go
		if e <= s.q[qi].rel {
			return true, now
		}
	}
	*s = saved
	s.x.restore(xs)
	return false, t
}

// View is a key's state at now as callers see it (see State), in schedule
// units; it requires advance at now and changes nothing.
type View struct {
	Tokens    float64 // the bucket's units less those queued (+Inf: no pace)
	Remaining float64 // units waits of one unit each could take at once
	Next      float64 // the turn of a wait of one unit
	Queued    float64
	// Critical, Background: of Queued, the units of the critical and
	// background classes' first attempts (classes.go).
	Critical, Background float64
	Interval             float64 // the pace in force; 0 for none
	Burst                float64 // the bucket's depth in units at that pace
	Cut                  bool
	Declared             bool
	Hold                 float64 // nothing goes before it (a pause)
	// The server's window, if one is known: what it has left, and its reset.
	Window      bool
	WindowLeft  float64
	WindowReset float64
}

// View returns the key's state at now.
func (s *State) View(now float64, c Config) View {
	interval, tau := s.Pace(now, c)
	v := View{
		Queued:     float64(s.Queued()),
		Critical:   float64(s.q[Critical].live()),
		Background: float64(s.q[Background].live()),
		Interval:   interval,
		Cut:        (s.cut.rate(now, c.Sec) > 0 || s.trim > 0) && interval > 0,
		Declared:   c.Interval == 0 && s.dInt > 0,
		Tokens:     math.Inf(1),
		Hold:       s.hold,
	}
	if s.win.valid {
		v.Window, v.WindowLeft, v.WindowReset = true, s.win.left, s.win.reset
	}
	if interval > 0 {
		v.Burst = tau / interval
		// GCRA: the bucket holds (now − tat + τ)/interval units, at most
		// its depth; queued tickets have not moved tat yet.
		v.Tokens = min(max((now-max(s.tat, s.hold)+tau)/interval, 0), v.Burst) - v.Queued
	}
	v.Next = s.TurnAt(now, c, v.Queued+1)
	// remaining: the most units past the head whose turns have come, as
	// advance counts them (turns grow with the position), bounded by what
	// the bucket or the window can hold.
	limit := math.Inf(1)
	if interval > 0 {
		limit = math.Floor(v.Burst + 1e-9)
	}
	if s.win.valid {
		limit = min(limit, s.win.left+s.probe(c))
	}
	if v.Queued > 0 || now < s.hold {
		return v // advance let go every unit whose turn had come
	}
	if math.IsInf(limit, 1) {
		v.Remaining = limit
		return v
	}
	v.Remaining = s.dueUnits(now, c, limit)
	return v
}
