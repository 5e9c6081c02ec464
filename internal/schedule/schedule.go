package schedule

import "math"

// State is one key's state. Its methods take the time now, the
// configured pace (interval per unit, 0 for none, and burst) and sec.
type State struct {
	tat  float64         // the bucket is full again at tat, counting units gone
	hold float64         // nothing goes before hold
	q    [Queues]line    // Retry, then the classes' first attempts (classes.go)
	vb   [Queues]float64 // each class's virtual start (classes.go)

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
	// sped: advance moved queued turns (earlier: the trim gave a step
	// back; later: a window started spreading its last units), which no
	// sleeping wait is told of otherwise; the waiter clears it and wakes
	// its sleepers.
	sped    bool
	credInt float64 // the interval in force at the last advance
	credTau float64 // and the bucket's depth in time then
	// The last change of the pace (see rescale): when, and the affine
	// map of earlier arrivals to the new pace.
	spAt, spK, spRho float64
	// hb: what the key's refusals told of a hidden budget
	// (schedule_budget.go).
	hb budget
	// x: the key's further limits (schedule_limits.go); nil for a key
	// with its one bucket.
	x *extras
}

// Init makes s the state of a new key: a full bucket, nothing queued,
// with the further limits lim (nil: none), which it keeps.
func (s *State) Init(lim []Limit) {
	*s = State{tat: math.Inf(-1), lastGo: math.Inf(-1)}
	if lim != nil {
		s.x = newExtras(lim)
	}
}

// Gone reports whether the ticket (qi, e) has gone.
func (s *State) Gone(qi int, e int64) bool { return e <= s.q[qi].rel }

// Sped reports whether advance moved queued turns since it was last
// asked (earlier: the trim gave a step back; later: a window started
// spreading), which no sleeping wait is told of otherwise, and clears it.
func (s *State) Sped() bool {
	sped := s.sped
	s.sped = false
	return sped
}

// Limits returns the key's further limits, nil if none; the caller must
// not change them.
func (s *State) Limits() []Limit {
	if s.x == nil {
		return nil
	}
	return s.x.lim
}

// Tat returns when the bucket is full again, counting the units gone.
func (s *State) Tat() float64 { return s.tat }

// Delay moves the bucket's next unit no sooner than t: tat to t if later.
// It reports whether tat moved. It only moves turns later, so every bound
// of the bucket holds.
func (s *State) Delay(t float64) bool {
	if t <= s.tat {
		return false
	}
	s.tat = t
	return true
}

// Rejected returns when the key's last rejection came (a bare one, or a
// refusal that trimmed), and whether one came.
func (s *State) Rejected() (at float64, ok bool) { return s.cut.last, s.cut.moved }

// MarkRejected records a bare rejection at now that changes no pace (a
// strict server's timing): the time of the last rejection moves, as a
// lone rejection's does, and nothing else.
func (s *State) MarkRejected(now float64) { s.cut.last, s.cut.moved = now, true }

// CutRate returns the pace of the cut in force at now, units a second; 0
// for none.
func (s *State) CutRate(now float64, c Config) float64 { return s.cut.rate(now, c.Sec) }

// Trim returns the share of a known limit the pace is trimmed by.
func (s *State) Trim() float64 { return s.trim }

// BusySince returns when units started going after a second without.
func (s *State) BusySince() float64 { return s.busySince }

// Config is a key's fixed configuration in schedule units.
type Config struct {
	Interval float64 // per unit; 0 for no configured limit
	Burst    float64
	Sec      float64 // schedule units in a second
}

// Base returns the configured pace, or the declared one where none is
// configured: interval (0 for none) and burst.
func (s *State) Base(c Config) (float64, float64) {
	interval, burst := c.Interval, c.Burst
	if c.Interval == 0 && s.dInt > 0 {
		interval, burst = s.dInt, max(s.dBurst, 1)
	}
	if interval > 0 && s.trim > 0 {
		interval /= 1 - s.trim
	}
	return interval, burst
}

// Pace returns the interval in force at now and the bucket's depth in
// time, τ.
func (s *State) Pace(now float64, c Config) (interval, tau float64) {
	interval, burst := s.Base(c)
	tau = burst * interval
	if r := s.cut.rate(now, c.Sec); r > 0 && c.Sec/r > interval {
		ci := c.Sec / r
		// At least a request at once (the largest cost of a wait on the
		// key): a bucket shallower than one would space requests by more
		// than their units' intervals (a unit deep: 2·ci − τ for units,
		// and a request of n units would wait for the last one's n too).
		tau = max(tau, max(s.maxCost, 1)*ci)
		interval = ci
	}
	return interval, tau
}

// Queued returns the units Queued in both queues.
func (s *State) Queued() int64 {
	n := int64(0)
	for qi := range s.q {
		n += s.q[qi].live()
	}
	return n
}

// probe returns the units a window probe may carry: the largest cost of a
// wait on the key, so that any wait fits in one probe.
func (s *State) probe(c Config) float64 {
	return max(s.maxCost, 1)
}
