package throttle

import (
	"math"
	"slices"
)

// A key's schedule: the one model of turns that [Limiter] keeps in memory
// and the distributed package keeps in Redis (its script mirrors this file
// rule for rule, and takes its constants from [ScheduleConstants]).
//
// # State
//
// A key's state is a token bucket kept as GCRA (tat: the time the bucket is
// full again, counting the units that have gone), a hold (nothing goes
// before it: pauses), two queues of tickets (retries ahead of first
// attempts), the server's window, a declared pace and an adaptive cut.
//
// A wait takes a ticket: a range of n unit numbers at the end of its queue.
// Its turn is never stored: it is a function of the ticket's position (the
// units queued ahead of it, plus its own n) and of the state as it is when
// the turn is asked for:
//
//	turn(p) = max(hold, max(tat, hold) + p·interval − τ, window(p))
//
// where interval is the pace in force (the slower of the configured or
// declared pace and the adaptive cut), τ is the bucket's depth in time
// (burst·interval of the configured or declared pace, so that a cut never
// lets more through at once than the bucket holds, and at least one
// interval, so that a cut's units are spaced by its interval), and
// window(p) is when
// the server's window admits the ticket's last unit: at once while units
// are left, one by one spread to the reset while few are, and one probe
// per probeWait after the reset until a response tells the next window.
//
// Units go in queue order as their turns pass (advance): tat moves by
// interval per unit, the window spends them, and the queue's head moves
// past them. Because turns are derived, never stored:
//
//   - a pause, a cut, a shift or a window moves every queued turn at once,
//     however many come, in any order (nothing to patch afterwards);
//   - a cut that regrows gives the time back to the queue, step by step;
//   - a cancelled ticket becomes a hole: every ticket behind it moves up by
//     its units, so the units are reused by the next ticket in line, and
//     never by two (positions are unique);
//   - a store that loses the state loses no rule: a fresh state is a full
//     bucket at the configured pace, never a slower one.
//
// # Settled costs
//
// A wait spends an estimate; its real cost may be known only from the
// response (an LLM call's tokens). Settling amends the cost of units that
// have gone (schedule_settle.go, the script's op settle): actual − spent
// more units, at the pace in force, moving tat, and with it every queued
// turn. A charge (actual > spent) is a debt: tat moves later, past now if
// need be, and the next waits pay it. A give-back (actual < spent, at
// most spent units since actual ≥ 0) moves tat earlier, then GCRA's floor
// applies (floorTat): the bucket never holds more than its burst at once,
// so units given back to a bucket that has refilled meanwhile are lost,
// never over-spent. Either way the queued turns move, and their sleepers
// are told (a Limiter's are woken; the script publishes the move). A
// charge also spends from the server's window (the server counted those
// units); a give-back does not refill it (the units may have gone in a
// window that is over: the server's next response says what is left).
// The units in flight, those counted as sent, the cut and the trim are
// about requests and their responses, which a settle follows: they stay.
// Never over then holds for the settled costs: the admissions and the
// settles, replayed through GCRA in time order (a charge as units going
// at its settle, a give-back as units coming back under the floor),
// conform to the bucket. A give-back counts when it is settled, not when
// its wait went (the schedule does not keep when that was): units given
// back to a bucket that refilled over them are lost if it is full then,
// but go to the next waits if waits emptied it meanwhile, so the units
// that go in an interval t may pass burst + rate·t by the units given
// back in it; those that go less those given back never do.
//
// # Invariants
//
// The property suite (schedule_prop_test.go, and the distributed package's
// against Redis) drives random sequences of waits, cancels, deadlines,
// pauses, windows, declared limits and bare rejections, and checks: never
// more than τ/interval + t/interval units in any interval t of a constant
// pace; nothing inside a pause; FIFO per queue for waits not cancelled;
// cancelled units reusable by exactly one later ticket; every queued wait
// done within its position at the configured pace plus a bounded recovery
// once the server stops rejecting; and bounded memory.
//
// # Several limits
//
// A key may carry further limits in units of their own (token buckets,
// fixed and sliding windows: Limiter.Limits); schedule_limits.go
// composes them with this state: a ticket's turn is the latest among
// the limits, FIFO, every limit charged at that turn, so that units one
// limit held back claim no credit on the others.
//
// All times are float64 in one unit (nanoseconds in Go, microseconds in
// Lua); sec is the number of those units in a second.

// The schedule's constants, in seconds or as plain numbers. The Lua script
// receives them from ScheduleConstants, so each exists once.
const (
	// probeWait: after a window's reset, with no response yet telling the
	// next window, one probe (of up to the key's largest cost) goes per
	// probeWait.
	probeWait = 1.0
	// windowKeep: a window no response refreshed is forgotten this long
	// after its reset (then the key runs at its other limits).
	windowKeep = 10.0
	// sameWindow: two resets closer than this are the same window (at most
	// half the window's length): resets come in whole seconds in most
	// dialects, and so does the Date they are measured against.
	sameWindow = 2.5
	// cutBeta: a cut multiplies the pace by this (AWS SDKs' and CUBIC's β).
	cutBeta = 0.7
	// cutFloor: no cut goes below this fraction of its reference rate.
	cutFloor = 0.25
	// cutMinRequests: nor below this many requests a second (in units: times
	// the rejected request's cost), so that a floor is in requests.
	cutMinRequests = 1.0
	// cutRecover: a cut regrows to its reference rate over this long, in
	// steps of cutStep, and is over then.
	cutRecover = 2.0
	cutStep    = 0.25
	// strikeWindow: a lone rejection under a known limit only shifts the
	// schedule (timer jitter against a strict server); a second one within
	// strikeWindow cuts.
	strikeWindow = 10.0
	// shiftSlots: intervals a lone rejection shifts the schedule by.
	shiftSlots = 1.0
	// A rejection under a known limit with no cut in force trims the
	// pace by trimStep of it, up to trimMax, instead of cutting it: a
	// strict server (no burst, a limit told exactly) rejects what timer
	// jitter brings early, and the margin it needs is learned. Units that
	// go give it back, a step per 1/trimTarget − 1 units (so that it
	// rests where about trimTarget of the requests are rejected); a key
	// that has had no rejection for trimKeep forgets it. A rejection past trimMax (an outage, a budget below the
	// limit) cuts, and the cut, which regrows, replaces the trim.
	trimStep   = 0.01
	trimMax    = 0.1
	trimTarget = 0.01
	trimKeep   = 60.0
	// maxSteps bounds the cut's steps a turn walks.
	maxSteps = 64
	// pendingIdle: a key idle this long forgets the units it counted as in
	// flight (responses that never came back through Adapt).
	pendingIdle = 10.0
	// lowShare: a window runs low (and is spread until its reset) under
	// this share of its size, or under lowUnits when its size is unknown.
	lowShare = 0.1
	lowUnits = 10.0
)

// ScheduleConstants returns the schedule's constants by the names the
// distributed package's Lua script uses, times in seconds. It exists so
// that the script's rules share this file's numbers; it is not meant for
// other callers.
func ScheduleConstants() map[string]float64 {
	return map[string]float64{
		"PROBE_WAIT":    probeWait,
		"WINDOW_KEEP":   windowKeep,
		"SAME_WINDOW":   sameWindow,
		"CUT_BETA":      cutBeta,
		"CUT_FLOOR":     cutFloor,
		"CUT_MIN_REQ":   cutMinRequests,
		"CUT_RECOVER":   cutRecover,
		"CUT_STEP":      cutStep,
		"CUT_PROBE":     cutProbe,
		"STRIKE_WINDOW": strikeWindow,
		"SHIFT_SLOTS":   shiftSlots,
		"TRIM_STEP":     trimStep,
		"TRIM_MAX":      trimMax,
		"TRIM_TARGET":   trimTarget,
		"TRIM_KEEP":     trimKeep,
		"PENDING_IDLE":  pendingIdle,
		"MAX_STEPS":     maxSteps,
		"LOW_SHARE":     lowShare,
		"LOW_UNITS":     lowUnits,
		"MAX_HOLES":     maxHoles,
	}
}

// The two queues: retries go ahead of first attempts.
const (
	queueRetry = 0
	queueFirst = 1
)

// maxHoles bounds the cancelled tickets a queue remembers; beyond it, the
// oldest hole is kept as queued units (its units are lost, never
// over-spent), so memory stays bounded whatever the cancel pattern.
const maxHoles = 256

// span is a cancelled ticket: the unit numbers (end-n, end].
type span struct{ end, n int64 }

// line is one queue: unit numbers 1, 2, … are given out in order; rel of
// them have gone; holes are cancelled tickets not yet passed, by end; big
// are the tickets of more than one unit not yet passed, so that a ticket's
// units go together (never some of them early), by end.
type line struct {
	rel, end int64
	holes    []span
	big      []span
}

// live returns the units queued.
func (q *line) live() int64 {
	n := q.end - q.rel
	for _, h := range q.holes {
		n -= h.n
	}
	return n
}

// ahead returns the live units in (rel, e]: a ticket's position in its
// queue; 0 if it has gone.
func (q *line) ahead(e int64) int64 {
	if e <= q.rel {
		return 0
	}
	n := e - q.rel
	for _, h := range q.holes {
		if h.end > e {
			break
		}
		n -= h.n
	}
	return n
}

// release lets at most k live units go from the head, whole tickets only,
// and returns how many went.
func (q *line) release(k int64) int64 {
	gone := int64(0)
	i, j := 0, 0 // holes and big tickets passed
	for {
		if i < len(q.holes) && q.holes[i].end-q.holes[i].n == q.rel {
			q.rel = q.holes[i].end // skip the hole
			i++
			continue
		}
		if k <= 0 {
			break
		}
		next := q.end
		if i < len(q.holes) {
			next = q.holes[i].end - q.holes[i].n
		}
		to := min(q.rel+k, next)
		// The big ticket that to would split, if any, is the first not
		// wholly before to (tickets do not overlap): the tickets before
		// it go whole, it does not go in part.
		for j < len(q.big) && q.big[j].end <= to {
			j++
		}
		if j < len(q.big) && q.big[j].end-q.big[j].n < to {
			to = q.big[j].end - q.big[j].n // not part of a ticket
		}
		if to <= q.rel {
			break
		}
		gone += to - q.rel
		k -= to - q.rel
		q.rel = to
	}
	for j < len(q.big) && q.big[j].end <= q.rel {
		j++
	}
	q.holes = trim(q.holes[i:])
	q.big = trim(q.big[j:])
	return gone
}

func trim(s []span) []span {
	if len(s) == 0 {
		return nil
	}
	return s
}

// take gives out a ticket of n units and returns its end.
func (q *line) take(n int64) int64 {
	q.end += n
	if n > 1 {
		q.big = append(q.big, span{end: q.end, n: n})
	}
	return q.end
}

// drop forgets the big ticket ending at e, if any.
func (q *line) drop(e int64) {
	q.big = slices.DeleteFunc(q.big, func(b span) bool { return b.end == e })
}

// cancel gives back the ticket (e-n, e], which has not gone. The tail's
// units are taken back outright; any other ticket becomes a hole.
func (q *line) cancel(e, n int64) {
	if e <= q.rel || e > q.end {
		return
	}
	if n > 1 {
		q.drop(e)
	}
	if e == q.end {
		q.end -= n
		for len(q.holes) > 0 && q.holes[len(q.holes)-1].end == q.end {
			q.end -= q.holes[len(q.holes)-1].n
			q.holes = q.holes[:len(q.holes)-1]
		}
		return
	}
	i, _ := slices.BinarySearchFunc(q.holes, e, func(h span, e int64) int { return int(h.end - e) })
	if i < len(q.holes) && q.holes[i].end == e {
		return // cancelled already
	}
	if len(q.holes) >= maxHoles {
		return // kept as queued units: lost, never over-spent
	}
	q.holes = slices.Insert(q.holes, i, span{end: e, n: n})
}

// window is the server's quota window as responses told it: left units may
// go before reset; after the reset, until a response tells the next window,
// units go as probes, probe units per probeWait (the n-th unit past left
// at reset + ⌊(probed+n−1)/probe⌋·probeWait).
type window struct {
	valid bool
	left  float64 // units that may go before reset
	reset float64 // when the window resets, as the server said
	// probeAt is when the probes start: the reset, or later when a wait
	// came after the probe periods had passed unused (probes bank no time).
	probeAt float64
	size    float64 // the window's size when known, else 0
	probed  float64 // units gone as probes since reset
	// While the window runs low its units are spread until the reset:
	// spreadLeft units from spreadAt, one per (reset-spreadAt)/spreadLeft,
	// the first at once.
	spreadAt, spreadLeft float64
}

// turn returns when the window lets the p-th unit past the head go.
func (w *window) turn(p, probe, sec float64) float64 {
	if !w.valid {
		return math.Inf(-1)
	}
	if p <= w.left {
		if si := w.spreadInterval(); si > 0 {
			return w.spreadAt + (w.spreadLeft-w.left+p-1)*si
		}
		return math.Inf(-1)
	}
	return w.probeAt + math.Floor(max(w.probed+p-w.left-1, 0)/probe)*probeWait*sec
}

// spend takes k units that went at now.
func (w *window) spend(k, now float64) {
	if !w.valid {
		return
	}
	if k <= w.left {
		w.left -= k
	} else {
		w.probed += k - w.left
		w.left = 0
	}
	if !w.spreading() && w.low() && now < w.reset && w.left > 0 {
		w.spreadAt, w.spreadLeft = now, w.left
	}
}

// low reports whether the window's units are few enough to spread.
func (w *window) low() bool {
	if w.size > 0 {
		return w.left < max(1, w.size*lowShare)
	}
	return w.left < lowUnits
}

func (w *window) spreading() bool { return w.spreadLeft > 0 }

// spreadInterval returns the spacing of a window spread over the time
// left to its reset, 0 when it is not spreading. The spread is a limit of
// its own, anchored at spreadAt, not the bucket's pace: a bucket deep in
// time (a declared 100 per 10 s) may owe more than the spread allows.
func (w *window) spreadInterval() float64 {
	if !w.valid || !w.spreading() || w.left <= 0 {
		return 0
	}
	return (w.reset - w.spreadAt) / w.spreadLeft
}

// update applies a response's window at now: left units until reset from
// now, of size units (0 if unknown) per length (0 if unknown). inFlight is
// the units that went and whose responses have not come: the server has
// not counted them yet.
func (w *window) update(now, left, reset, size, length, inFlight, sec float64) {
	at := now + reset
	same := sameWindow * sec
	if length > 0 {
		same = min(same, length/2)
	}
	told := left
	// Whole units: a count of units in flight is a weighted estimate (see
	// sent), and a part of a unit is no unit to send.
	left = math.Floor(max(left-inFlight, 0))
	switch {
	case w.valid && w.probed == 0 && math.Abs(at-w.reset) < same:
		// The same window: the local count has spent the units in flight
		// already, so take the server's count as it is, if lower (as
		// told: max(left-inFlight, 0)+inFlight is inFlight, not the
		// server's count, when more are in flight than it says remain).
		w.left = min(w.left, math.Floor(told))
		if w.probeAt == w.reset {
			w.probeAt = min(w.reset, at)
		}
		w.reset = min(w.reset, at)
	case !w.valid || w.probed > 0 || at > w.reset:
		*w = window{valid: true, left: left, reset: at, probeAt: at}
	}
	w.size = size
	if !w.spreading() && w.low() && w.left > 0 {
		w.spreadAt, w.spreadLeft = now, w.left
	}
}

// cut is an adaptive slow-down after bare rejections (429 or 503 without a
// Retry-After), after AWS's adaptive retry and CUBIC: the pace is cut to
// cutBeta of the rate the key was sending at (wMax), never below a floor,
// and regrows to wMax over cutRecover in steps of cutStep. A key with a
// limit (configured or declared) has wMax at most that limit and its floor
// at cutFloor of it; the cut is over once it has regrown. A key without
// one then probes beyond wMax, doubling each second (a rate that a
// rejection cut to its floor during an outage is back within seconds), until a
// rejection cuts again or the pace reaches ten times wMax, where the cut
// is over. The rates are what the key was sending or was told, never read
// from state a store restart could have wiped. A rejection of a request
// sent before the last cut or shift does not cut again: it was in flight
// under the old pace.
type cut struct {
	r0    float64 // units a second right after the cut; 0: none ever
	wMax  float64 // units a second it regrows to
	floor float64 // units a second it never goes below
	at    float64 // when the cut happened
	open  bool    // no limit: probe beyond wMax
	last  float64 // when the last cut or shift happened
	moved bool    // a cut or shift has happened: last is set
}

// cutProbe: a key without a limit, its cut regrown, probes beyond the rate
// it was cut from, growing by this share each second, compounded.
const cutProbe = 1.0

// rate returns the cut's pace at now in units a second; 0 when no cut is
// in force.
func (c *cut) rate(now, sec float64) float64 {
	if c.r0 == 0 || now < c.at {
		return 0
	}
	d := math.Floor((now-c.at)/(cutStep*sec)) * cutStep // seconds, in steps
	if d < cutRecover {
		return max(c.r0+(c.wMax-c.r0)*d/cutRecover, c.floor)
	}
	if !c.open {
		return 0
	}
	r := c.wMax * math.Pow(1+cutProbe, d-cutRecover)
	if r >= 10*c.wMax {
		return 0
	}
	return r
}

// nextStep returns when the cut's pace next changes, +Inf if no cut is in
// force.
func (c *cut) nextStep(now, sec float64) float64 {
	if c.rate(now, sec) == 0 {
		return math.Inf(1)
	}
	return c.at + (math.Floor((now-c.at)/(cutStep*sec))+1)*cutStep*sec
}

// schedule is one key's state. Its methods take the time now, the
// configured pace (interval per unit, 0 for none, and burst) and sec.
type schedule struct {
	tat  float64 // the bucket is full again at tat, counting units gone
	hold float64 // nothing goes before hold
	q    [2]line // queueRetry, queueFirst

	win       window
	cut       cut
	dInt      float64 // the server's declared interval; 0 if none
	dBurst    float64
	pending   float64 // units gone whose responses have not come
	lastGo    float64 // when units last went
	busySince float64 // when units started going after a second without
	sentSec   float64 // the second sentCur counts
	sentCur   float64 // units gone in second sentSec
	sentPrev  float64 // units gone in the second before
	maxCost   float64 // the largest cost of a wait on the key
	trim      float64 // the share of a known limit the pace is trimmed by
	trimGone  float64 // units gone since the trim last moved
	// sped: advance moved queued turns earlier (the trim gave a step
	// back), which no sleeping wait is told of otherwise; the waiter
	// clears it and wakes its sleepers.
	sped    bool
	credInt float64 // the interval in force at the last advance
	credTau float64 // and the bucket's depth in time then
	// The last change of the pace (see rescale): when, and the affine
	// map of earlier arrivals to the new pace.
	spAt, spK, spRho float64
	// x: the key's further limits (schedule_limits.go); nil for a key
	// with its one bucket.
	x *extras
}

// pacing is a key's fixed configuration in schedule units.
type pacing struct {
	interval float64 // per unit; 0 for no configured limit
	burst    float64
	sec      float64 // schedule units in a second
}

// base returns the configured pace, or the declared one where none is
// configured: interval (0 for none) and burst.
func (s *schedule) base(c pacing) (float64, float64) {
	interval, burst := c.interval, c.burst
	if c.interval == 0 && s.dInt > 0 {
		interval, burst = s.dInt, max(s.dBurst, 1)
	}
	if interval > 0 && s.trim > 0 {
		interval /= 1 - s.trim
	}
	return interval, burst
}

// pace returns the interval in force at now and the bucket's depth in
// time, τ.
func (s *schedule) pace(now float64, c pacing) (interval, tau float64) {
	interval, burst := s.base(c)
	tau = burst * interval
	if r := s.cut.rate(now, c.sec); r > 0 && c.sec/r > interval {
		ci := c.sec / r
		// At least a request at once (the largest cost of a wait on the
		// key): a bucket shallower than one would space requests by more
		// than their units' intervals (a unit deep: 2·ci − τ for units,
		// and a request of n units would wait for the last one's n too).
		tau = max(tau, max(s.maxCost, 1)*ci)
		interval = ci
	}
	return interval, tau
}

// queued returns the units queued in both queues.
func (s *schedule) queued() int64 {
	return s.q[queueRetry].live() + s.q[queueFirst].live()
}

// probe returns the units a window probe may carry: the largest cost of a
// wait on the key, so that any wait fits in one probe.
func (s *schedule) probe(c pacing) float64 {
	return max(s.maxCost, 1)
}

// advance lets go, at now, the queued units whose turns have come.
func (s *schedule) advance(now float64, c pacing) {
	if s.win.valid && now >= s.win.reset+windowKeep*c.sec && s.queued() == 0 {
		s.win = window{}
	}
	if now-s.lastGo > pendingIdle*c.sec {
		s.pending = 0
	}
	if s.trim > 0 && now-s.cut.last > trimKeep*c.sec {
		s.trim, s.trimGone = 0, 0
	}
	s.rescale(now, c)
	live := s.queued()
	if live == 0 || now < s.hold {
		return
	}
	var k int64
	if s.x != nil {
		k = s.x.due(s, now, c) // whole tickets, on every limit
	} else {
		k = int64(s.dueUnits(now, c, float64(live)))
	}
	interval, _ := s.pace(now, c)
	if k > 0 {
		// Release on copies first: tatAfter reads the tickets as they
		// were (release does not write to the lines' slices).
		qr, qf := s.q[queueRetry], s.q[queueFirst]
		gone := qr.release(k)
		if qr.live() == 0 { // retries first
			gone += qf.release(k - gone)
		}
		if gone > 0 {
			n := float64(gone)
			tat := s.tat
			if interval > 0 {
				tat = s.tatAfter(now, c, n)
			}
			s.q[queueRetry], s.q[queueFirst] = qr, qf
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
			s.win.spend(n, now)
			if s.trim > 0 {
				// Units that went give the margin back: a step per
				// 1/trimTarget − 1 units, so that a rejection rate of
				// trimTarget holds it where it is; in steps, so that the
				// queued turns move earlier seldom, and with a wake-up.
				s.trimGone += n
				if per := (1 - trimTarget) / trimTarget; s.trimGone >= per {
					steps := math.Floor(s.trimGone / per)
					s.trimGone -= steps * per
					s.trim = max(0, s.trim-steps*trimStep)
					s.rescale(now, c) // at once: turns asked now see the new pace
					s.sped = s.queued() > 0
				}
			}
			s.pending += n
			if now-s.lastGo > c.sec {
				s.busySince = now
			}
			s.lastGo = now
			s.count(now, n, c.sec)
		}
	}
	s.floorTat(now, c)
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
func (s *schedule) rescale(now float64, c pacing) {
	interval, tau := s.pace(now, c)
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
		s.floorTat(now, c)
		s.x.moved(now)
	}
	s.credInt, s.credTau = interval, tau
}

// arrival returns when a unit that arrived at e (the window's turn for it)
// arrived as the pace in force counts it: later than e if e is before the
// last change of the pace, so that the time it waited at the old pace is
// worth the units it was then, not more.
func (s *schedule) arrival(e float64) float64 {
	if e >= s.spAt {
		return e
	}
	return max(e, s.spK-(s.spAt-e)*s.spRho)
}

// dueUnits returns the most units past the head, at most hi, whose turns
// have come at now (turns grow with the position). A turn within a
// picosecond of now has come: turns are sums of floats (of nanoseconds
// here), and a wait sleeps until its turn rounded up.
func (s *schedule) dueUnits(now float64, c pacing, hi float64) float64 {
	due := now + 1e-12*c.sec
	if s.turnAt(now, c, hi) <= due {
		return hi
	}
	lo := 0.0
	for lo < hi { // turnAt(hi) > now
		mid := math.Floor((lo + hi + 1) / 2)
		if s.turnAt(now, c, mid) <= due {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// floorTat applies GCRA's max(tat, arrival) at now: a bucket fills to its
// burst and no further. The units still queued have their turns after
// now; a head that waited on something other than the bucket (a pause, a
// window, a pace yet to start) claims no credit from before now, and one
// that waits on the bucket keeps what it gathered at the pace in force now
// (a ticket larger than the bucket's depth gathers it over time), no more.
func (s *schedule) floorTat(now float64, c pacing) {
	floor := now
	if interval, tau := s.pace(now, c); interval > 0 && s.queued() > 0 {
		first, last := s.ticketAt(1)
		floor -= max(0, (last-first+1)*interval-tau)
	}
	s.tat = max(s.tat, floor)
}

// ticketAt returns the positions past the head of the first and the last
// unit of the ticket that holds the p-th unit.
func (s *schedule) ticketAt(p float64) (first, last float64) {
	base := 0.0 // units of the queues before q
	for qi := range s.q {
		q := &s.q[qi]
		for _, b := range q.big {
			hi := float64(q.ahead(b.end)) + base
			if lo := hi - float64(b.n) + 1; lo <= p && p <= hi {
				return lo, hi
			}
		}
		base += float64(q.live())
	}
	return p, p
}

// turnAt returns the turn at now of the p-th unit past the head: no
// earlier than the hold and the window's turn for it, and the bucket's
// (cut steps included) once the units before it have gone, each no
// earlier than it could (see tatAfter).
func (s *schedule) turnAt(now float64, c pacing, p float64) float64 {
	interval, tau := s.pace(now, c)
	t := s.hold
	if s.win.valid {
		t = max(t, s.win.turn(p, s.probe(c), c.sec))
	}
	if interval > 0 {
		t = max(t, s.tatAfterAt(now, c, p, interval, tau)-tau)
	}
	return t
}

// tatAfter returns the bucket's tat once p more units past the head have
// gone: GCRA's max(tat, arrival) + interval unit by unit, where a unit
// arrives when the limits other than the bucket let it go (the hold, the
// window's turn). In closed form: the largest of the chain from the head,
// of the chain from the first unit of p's block (units a window lets go
// together: a probe period's, the spread's), of the first probe period's,
// and of p's own arrival; so that units a window held claim no credit from
// before they could go.
func (s *schedule) tatAfter(now float64, c pacing, p float64) float64 {
	interval, tau := s.pace(now, c)
	return s.tatAfterAt(now, c, p, interval, tau)
}

// tatAfterAt is tatAfter with the pace in force at now given.
func (s *schedule) tatAfterAt(now float64, c pacing, p, interval, tau float64) float64 {
	a := max(s.tat, s.hold)
	t := s.paced(now, a-tau, p, c) + tau // the chain from the head
	w := &s.win
	if !w.valid || interval == 0 {
		return t
	}
	probe := s.probe(c)
	if e := w.turn(p, probe, c.sec); e > math.Inf(-1) {
		t = max(t, s.arrival(e)+interval)
	}
	chain := func(first float64) { // the chain from the first unit of a block
		// A ticket goes whole, at its last unit's turn: a ticket that
		// starts before the block goes with it, its first units too.
		first, last := s.ticketAt(max(first, 1))
		if e := w.turn(last, probe, c.sec); e > math.Inf(-1) {
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
func (s *schedule) goNow(now float64, c pacing, qi int, n int64) bool {
	if s.win.valid || s.cut.r0 != 0 || s.trim > 0 || now < s.hold || s.q[queueRetry].rel != s.q[queueRetry].end || s.queued() != 0 {
		return false
	}
	interval, burst := s.base(c)
	tat := max(s.tat, now)
	// (tat − now) + (n − burst)·interval, not tat + n·interval − τ: at a
	// tiny rate (an interval of 1e19 ns) the sum of a time and an
	// interval rounds by microseconds, and a full bucket would refuse.
	if interval > 0 && (tat-now)+(float64(n)-burst)*interval > 0 {
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
	if now-s.lastGo > c.sec {
		s.busySince = now
	}
	s.lastGo = now
	s.count(now, float64(n), c.sec)
	return true
}

// count counts k units gone at now, for the rate a cut without a limit
// starts from.
func (s *schedule) count(now, k, sec float64) {
	cur := math.Floor(now / sec)
	switch cur {
	case s.sentSec:
	case s.sentSec + 1:
		s.sentSec, s.sentPrev, s.sentCur = cur, s.sentCur, 0
	default:
		s.sentSec, s.sentPrev, s.sentCur = cur, 0, 0
	}
	s.sentCur += k
}

// sent returns the units gone over the last second.
func (s *schedule) sent(now, sec float64) float64 {
	s.count(now, 0, sec)
	frac := now/sec - s.sentSec
	return s.sentCur + s.sentPrev*(1-frac)
}

// position returns the units ahead of the ticket (qi, e), its own
// included; 0 if it has gone.
func (s *schedule) position(qi int, e int64) int64 {
	p := s.q[qi].ahead(e)
	if p > 0 && qi == queueFirst {
		p += s.q[queueRetry].live()
	}
	return p
}

// turn returns the turn at now of the ticket (qi, e): -Inf if it has gone.
func (s *schedule) turn(now float64, c pacing, qi int, e int64) float64 {
	p := float64(s.position(qi, e))
	if p <= 0 {
		return math.Inf(-1)
	}
	if s.x != nil {
		return s.x.turn(s, now, c, qi, e)
	}
	return s.turnAt(now, c, p)
}

// paced returns when p units going from t have gone, at the pace in force
// at each instant from now on: a cut that regrows in steps gives the time
// back to the queue (the time before now at the pace of now, as advance
// counts it). It walks at most maxSteps of the cut's steps, then goes on
// at the last step's pace.
func (s *schedule) paced(now, t, p float64, c pacing) float64 {
	if s.cut.r0 == 0 { // no cut: one pace
		iv, _ := s.pace(now, c)
		return t + p*iv
	}
	for range maxSteps {
		at := max(t, now)
		next := s.cut.nextStep(at, c.sec)
		if math.IsInf(next, 1) {
			break
		}
		iv, _ := s.pace(at, c)
		if iv == 0 || t+p*iv <= next {
			return t + p*iv
		}
		p -= (next - t) / iv
		t = next
	}
	iv, _ := s.pace(max(t, now), c)
	return t + p*iv
}

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
		(s.trim == 0 || now-s.cut.last > trimKeep*c.sec) && (s.x == nil || s.x.idle(now))
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
