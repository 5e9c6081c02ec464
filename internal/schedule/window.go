package schedule

import "math"

// The server's window and the adaptive cut (see schedule.go): the
// parts of a key's state that what servers say sets.

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
	// told is the fewest units the server said remain in this window:
	// its latest count, whatever order the responses came in.
	told float64
	// While the window runs low its units are spread until the reset:
	// spreadLeft units from spreadAt, one per (reset-spreadAt)/spreadLeft,
	// the first at once.
	spreadAt, spreadLeft float64
	// A learned budget's window (schedule_budget.go): rolls, its length
	// as told, lo < W ≤ hi the bounds on the budget's true window, and
	// past the units spent at or after the reset. A window a probe's
	// acceptance started (started) went first at sent0, answered at first.
	rolls, started     bool
	tight              bool    // a probe was refused: hi is the length
	miss               float64 // when a unit of a window's burst was last refused (0: never)
	length, lo, hi     float64
	past, sent0, first float64
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

// spend takes k units that went at now, past of them at or after the
// window's reset (those count in a learned budget's next window). It
// reports whether the window started spreading its last units.
func (w *window) spend(k, past, now float64) bool {
	if !w.valid {
		return false
	}
	if now >= w.reset {
		w.past += past
	}
	if k <= w.left {
		w.left -= k
	} else {
		w.probed += k - w.left
		w.left = 0
	}
	// A learned budget's window lets its units go at once (budget.go): it
	// is not spread.
	if !w.rolls && !w.spreading() && w.low() && now < w.reset && w.left > 0 {
		w.spreadAt, w.spreadLeft = now, w.left
		return true
	}
	return false
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
// the units that went and whose responses have not come.
//
// Units in flight are counted once. The server may have counted some of
// them already (responses come out of order: a burst's first answer
// says 34 remain, its oldest 49), and every unit answered has been
// counted by the time of the fewest remaining told (told): a unit the
// server had not counted yet is in flight, so at least told − inFlight
// remain. The local count spends every unit as it goes, and never
// exceeds a count the server told; it is raised to that bound when it
// falls below it. Taking a new window's first answer less everything in
// flight, and nothing back, lost up to a burst of the window for good:
// 32 requests sent at once to a fixed window of 50 left it at 3 after
// the first answer, and 14 units of it unused (TestTransportFleetWindow,
// goodput 0.887 of the allowance).
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
		w.told = min(w.told, math.Floor(told))
		if up := math.Floor(max(w.told-inFlight, 0)); up > w.left {
			w.left, w.spreadAt, w.spreadLeft = up, 0, 0 // the spread starts again from it
		}
		w.left = min(w.left, math.Floor(told))
		if w.probeAt == w.reset {
			w.probeAt = min(w.reset, at)
		}
		w.reset = min(w.reset, at)
	case !w.valid || w.probed > 0 || at > w.reset:
		*w = window{valid: true, left: left, reset: at, probeAt: at, told: math.Floor(told)}
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

// rate returns the cut's pace at now in units a second; 0 when no cut is
// in force.
func (c *cut) rate(now, sec float64) float64 {
	if c.r0 == 0 || now < c.at {
		return 0
	}
	d := math.Floor((now-c.at)/(CutStep*sec)) * CutStep // seconds, in steps
	if d < CutRecover {
		return max(c.r0+(c.wMax-c.r0)*d/CutRecover, c.floor)
	}
	if !c.open {
		return 0
	}
	r := c.wMax
	for j := (d - CutRecover) / CutStep; j > 0 && r < 10*c.wMax; j-- {
		r *= cutGrow
	}
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
	return c.at + (math.Floor((now-c.at)/(CutStep*sec))+1)*CutStep*sec
}
