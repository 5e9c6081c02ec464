package schedule

import "math"

// Turns (see schedule.go): a ticket's turn from its position and the
// key's state, and units going as their turns pass (advance).

// Advance lets go, at now, the queued units whose turns have come.
func (s *State) Advance(now float64, c Config) {
	if s.win.valid && now >= s.win.reset+windowKeep*c.Sec && s.Queued() == 0 {
		s.win = window{}
	}
	if now-s.lastGo > pendingIdle*c.Sec {
		s.pending = 0
	}
	if s.trim > 0 && now-s.cut.last > TrimKeep*c.Sec {
		s.trim, s.trimGone = 0, 0
	}
	s.rescale(now, c)
	live := s.Queued()
	if live == 0 || now < s.hold {
		return
	}
	var k int64
	if s.x != nil {
		k = s.x.due(s, now, c) // whole tickets, on every limit
	} else {
		k = int64(s.dueUnits(now, c, float64(live)))
	}
	interval, _ := s.Pace(now, c)
	if k > 0 {
		// Release on copies first: tatAfter reads the tickets as they
		// were (release does not write to the lines' slices).
		qs := s.q
		gone := qs[Retry].release(k)
		var moved [Queues]int64
		if qs[Retry].live() == 0 { // retries first
			var g int64
			g, moved = s.releaseClasses(&qs, k-gone)
			gone += g
		}
		if gone > 0 {
			n := float64(gone)
			tat := s.tat
			if interval > 0 {
				tat = s.tatAfter(now, c, n)
			}
			// A learned budget's window at or past its reset: the units
			// that count in the next window are those whose turns were at
			// or after the reset, not all that go now (a store releases
			// sleeping waits' units at its next call, possibly past the
			// reset).
			past := n
			if w := &s.win; w.valid && w.rolls && now >= w.reset {
				lo, hi := 0.0, n // the most units whose turns were before it
				for lo < hi {
					mid := math.Floor((lo + hi + 1) / 2)
					if s.TurnAt(now, c, mid) < w.reset {
						lo = mid
					} else {
						hi = mid - 1
					}
				}
				past = n - lo
			}
			s.q = qs
			for qi, m := range moved {
				s.vb[qi] += float64(m)
			}
			s.tidyClasses()
			s.tat = tat
			if interval > 0 {
				if s.cut.r0 != 0 {
					// Under a cut the pace steps: the units may have
					// been priced at a step that was not in force when
					// they went. They went by now: GCRA's max(tat, now)
					// + n·interval bounds what they leave.
					s.tat = max(s.tat, now+n*interval)
				}
			}
			if s.x != nil {
				s.x.commit(s)
			}
			if s.win.spend(n, past, now) && s.Queued() > 0 {
				// The window spreads its last units: the turns of those
				// queued move later, which their sleepers must learn.
				s.sped = true
			}
			if s.trim > 0 {
				// Units that went give the margin back: a step per
				// 1/trimTarget − 1 units, so that a rejection rate of
				// trimTarget holds it where it is; in steps, so that the
				// queued turns move earlier seldom, and with a wake-up.
				s.trimGone += n
				if per := (1 - TrimTarget) / TrimTarget; s.trimGone >= per {
					steps := math.Floor(s.trimGone / per)
					s.trimGone -= steps * per
					s.trim = max(0, s.trim-steps*TrimStep)
					s.rescale(now, c) // at once: turns asked now see the new pace
					s.sped = s.Queued() > 0
				}
			}
			s.pending += n
			if now-s.lastGo > c.Sec {
				s.busySince = now
			}
			s.lastGo = now
			s.count(now, n, c.Sec)
		}
	}
	s.FloorTat(now, c)
}

// rescale keeps the units the bucket holds ((now − tat + τ)/interval,
// more than its burst when a ticket larger than the bucket's depth
// gathered them) when the pace in force changed since the last advance: at
// a faster pace, or a deeper bucket, the same time would be worth more
// units than were ever owed, and a debt (tat past now) fewer. The units
// are kept exactly, up to the new depth or the head ticket's size.
//
// The window's turns are arrivals too (the chains of tatAfter start at
// them): the last speed-up is kept (spAt, spK, spRho) so that an arrival
// before it is priced the same way (see arrival).
func (s *State) rescale(now float64, c Config) {
	interval, tau := s.Pace(now, c)
	if interval > 0 && s.credInt > 0 && (s.credInt != interval || s.credTau != tau) {
		// An arrival at e < now holds (now − e + τ₀)/interval₀ units;
		// at the new pace it is the arrival K − (now − e)·ρ.
		s.spAt, s.spRho = now, interval/s.credInt
		s.spK = now + tau - s.credTau*s.spRho
		// The bucket: the same map, its debt (tat past now) included, and
		// no more units than the new depth holds or the head's ticket
		// needs (floorTat). Units a pause that ended held arrived at its
		// end (GCRA's max(tat, arrival)).
		s.tat = s.spK - (now-max(s.tat, min(s.hold, now)))*s.spRho
		s.FloorTat(now, c)
		s.x.moved(now)
	}
	s.credInt, s.credTau = interval, tau
}

// arrival returns when a unit that arrived at e (the window's turn for it)
// arrived as the pace in force counts it: later than e if e is before the
// last change of the pace, so that the time it waited at the old pace is
// worth the units it was then, not more.
func (s *State) arrival(e float64) float64 {
	if e >= s.spAt {
		return e
	}
	return max(e, s.spK-(s.spAt-e)*s.spRho)
}

// dueUnits returns the most units past the head, at most hi, whose turns
// have come at now (turns grow with the position). A turn within a
// picosecond of now has come: turns are sums of floats (of nanoseconds
// here), and a wait sleeps until its turn rounded up.
func (s *State) dueUnits(now float64, c Config, hi float64) float64 {
	due := now + 1e-12*c.Sec
	if s.TurnAt(now, c, hi) <= due {
		return hi
	}
	lo := 0.0
	for lo < hi { // turnAt(hi) > now
		mid := math.Floor((lo + hi + 1) / 2)
		if s.TurnAt(now, c, mid) <= due {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// FloorTat applies GCRA's max(tat, arrival) at now: a bucket fills to its
// burst and no further. The units still queued have their turns after
// now; a head that waited on something other than the bucket (a pause, a
// window, a pace yet to start) claims no credit from before now, and one
// that waits on the bucket keeps what it gathered at the pace in force now
// (a ticket larger than the bucket's depth gathers it over time), no more.
func (s *State) FloorTat(now float64, c Config) {
	floor := now
	if interval, tau := s.Pace(now, c); interval > 0 && s.Queued() > 0 {
		first, last := s.ticketAt(1)
		floor -= max(0, (last-first+1)*interval-tau)
	}
	s.tat = max(s.tat, floor)
}

// ticketAt returns the positions past the head of the first and the last
// unit of the ticket that holds the p-th unit.
func (s *State) ticketAt(p float64) (first, last float64) {
	retries := s.q[Retry].live()
	for qi := range s.q {
		q := &s.q[qi]
		for _, b := range q.big {
			hi := q.ahead(b.end)
			if qi != Retry {
				hi += retries + s.others(qi, hi-b.n)
			}
			if lo := float64(hi - b.n + 1); lo <= p && p <= float64(hi) {
				return lo, float64(hi)
			}
		}
	}
	return p, p
}

// TurnAt returns the turn at now of the p-th unit past the head: no
// earlier than the hold and the window's turn for it, and the bucket's
// (cut steps included) once the units before it have gone, each no
// earlier than it could (see tatAfter).
func (s *State) TurnAt(now float64, c Config, p float64) float64 {
	interval, tau := s.Pace(now, c)
	t := s.hold
	if s.win.valid {
		t = max(t, s.win.turn(p, s.probe(c), c.Sec))
	}
	if interval > 0 {
		t = max(t, s.head(now, c, p, interval, tau, true), s.chains(now, c, p, interval)-tau)
	}
	return t
}

// head returns the chain from the head: the tat once p units past the
// head have gone from max(tat, hold) at the pace in force, or (turn) the
// p-th unit's turn on it, tat − τ. Without a cut each is one sum, the
// turn's small terms first ((p·interval − τ) is exact for a full
// bucket's p = burst), as the script's fast paths compute it.
func (s *State) head(now float64, c Config, p, interval, tau float64, turn bool) float64 {
	a := max(s.tat, s.hold)
	switch {
	case s.cut.r0 != 0 && turn:
		return s.paced(now, a-tau, p, c)
	case s.cut.r0 != 0:
		return s.paced(now, a-tau, p, c) + tau
	case turn:
		return a + (p*interval - tau)
	}
	return a + p*interval
}

// tatAfter returns the bucket's tat once p more units past the head have
// gone: GCRA's max(tat, arrival) + interval unit by unit, where a unit
// arrives when the limits other than the bucket let it go (the hold, the
// window's turn). In closed form: the largest of the chain from the head,
// of the chain from the first unit of p's block (units a window lets go
// together: a probe period's, the spread's), of the first probe period's,
// and of p's own arrival; so that units a window held claim no credit from
// before they could go.
func (s *State) tatAfter(now float64, c Config, p float64) float64 {
	interval, tau := s.Pace(now, c)
	return s.tatAfterAt(now, c, p, interval, tau)
}

// tatAfterAt is tatAfter with the pace in force at now given.
func (s *State) tatAfterAt(now float64, c Config, p, interval, tau float64) float64 {
	return max(s.head(now, c, p, interval, tau, false), s.chains(now, c, p, interval))
}

// chains returns the largest of tatAfter's chains but the head's (see
// tatAfter); −Inf without a window.
func (s *State) chains(now float64, c Config, p, interval float64) float64 {
	t := math.Inf(-1)
	w := &s.win
	if !w.valid || interval == 0 {
		return t
	}
	probe := s.probe(c)
	if e := w.turn(p, probe, c.Sec); e > math.Inf(-1) {
		t = max(t, s.arrival(e)+interval)
	}
	chain := func(first float64) { // the chain from the first unit of a block
		// A ticket goes whole, at its last unit's turn: a ticket that
		// starts before the block goes with it, its first units too.
		first, last := s.ticketAt(max(first, 1))
		if e := w.turn(last, probe, c.Sec); e > math.Inf(-1) {
			t = max(t, s.arrival(e)+(p-first+1)*interval)
		}
	}
	if w.spreadInterval() > 0 {
		// The spread's units arrive one by one: the chain from its first
		// unit binds the units past it too (the probes after the reset).
		chain(1)
	}
	if p <= w.left {
		return t
	}
	// The chains from every probe period's first unit have one slope, so
	// the largest is the first period's or p's own (which one depends on
	// whether a period's units take longer at the bucket's pace than the
	// period lasts): both, and tatAfter grows with p.
	b := math.Floor(max(w.probed+p-w.left-1, 0) / probe) // p's probe period
	chain(w.left + b*probe - w.probed + 1)
	chain(w.left - w.probed + 1)
	return t
}

// goNow lets a wait of n units at now go at once, if the key's queue is
// empty, nothing but the bucket applies, and the bucket holds n units: the
// rules of enqueue, turn and advance for that one case, without their
// search (the common wait of a key that is not held back). It reports
// whether the units went; if not, nothing changed.
func (s *State) goNow(now float64, c Config, qi int, n int64) bool {
	if s.win.valid || s.cut.r0 != 0 || s.trim > 0 || now < s.hold || s.q[Retry].rel != s.q[Retry].end || s.Queued() != 0 {
		return false
	}
	interval, burst := s.Base(c)
	tat := max(s.tat, now)
	// The turn as head computes it, tat + (n·interval − τ), not tat +
	// n·interval − τ: at a tiny rate (an interval of 1e19 ns) the sum of
	// a time and an interval rounds by microseconds, and a full bucket
	// would refuse.
	if interval > 0 && tat+(float64(n)*interval-burst*interval) > now {
		return false
	}
	s.maxCost = max(s.maxCost, float64(n))
	s.q[qi].take(n)
	s.q[qi].release(n)
	s.tat = tat
	if interval > 0 {
		s.tat += float64(n) * interval
	}
	s.pending += float64(n)
	if now-s.lastGo > c.Sec {
		s.busySince = now
	}
	s.lastGo = now
	s.count(now, float64(n), c.Sec)
	return true
}

// count counts k units gone at now, for the rate a cut without a limit
// starts from.
func (s *State) count(now, k, sec float64) {
	cur := math.Floor(now / sec)
	switch cur {
	case s.sentSec:
	case s.sentSec + 1:
		s.sentSec, s.sentPrev, s.sentCur = cur, s.sentCur, 0
	default:
		s.sentSec, s.sentPrev, s.sentCur = cur, 0, 0
	}
	s.sentCur += k
	s.hb.counted(now, k, sec)
}

// sent returns the units gone over the last second.
func (s *State) sent(now, sec float64) float64 {
	s.count(now, 0, sec)
	frac := now/sec - s.sentSec
	return s.sentCur + s.sentPrev*(1-frac)
}

// position returns the units ahead of the ticket (qi, e), its own
// included; 0 if it has gone.
func (s *State) position(qi int, e int64) int64 {
	q := &s.q[qi]
	p := q.ahead(e)
	if p <= 0 || qi == Retry {
		return p
	}
	p += s.q[Retry].live()
	if s.classes() > 1 {
		p += s.others(qi, q.ahead(e)-q.sizeAt(e))
	}
	return p
}

// Turn returns the Turn at now of the ticket (qi, e): -Inf if it has gone.
func (s *State) Turn(now float64, c Config, qi int, e int64) float64 {
	p := float64(s.position(qi, e))
	if p <= 0 {
		return math.Inf(-1)
	}
	if s.x != nil {
		return s.x.turn(s, now, c, qi, e)
	}
	return s.TurnAt(now, c, p)
}

// paced returns when p units going from t have gone, at the pace in force
// at each instant from now on: a cut that regrows in steps gives the time
// back to the queue (the time before now at the pace of now, as advance
// counts it). It walks at most maxSteps of the cut's steps, then goes on
// at the last step's pace.
func (s *State) paced(now, t, p float64, c Config) float64 {
	if s.cut.r0 == 0 { // no cut: one pace
		iv, _ := s.Pace(now, c)
		return t + p*iv
	}
	for range maxSteps {
		at := max(t, now)
		next := s.cut.nextStep(at, c.Sec)
		if math.IsInf(next, 1) {
			break
		}
		iv, _ := s.Pace(at, c)
		if iv == 0 || t+p*iv <= next {
			return t + p*iv
		}
		p -= (next - t) / iv
		t = next
	}
	iv, _ := s.Pace(max(t, now), c)
	return t + p*iv
}

// Repace prepares the state at now, after Advance, for a change of its
// configuration: the bucket holds what it holds now, at most its burst
// (GCRA), however long it was idle, and a tat left from an earlier pace is
// no debt when no pace is in force. The next Advance under the new
// configuration keeps those units at the new pace (rescale).
func (s *State) Repace(now float64, c Config) {
	s.FloorTat(now, c)
	if iv, _ := s.Pace(now, c); iv == 0 {
		s.tat = min(s.tat, now)
	}
}
