package schedule

import "math"

// A key's schedule: the one model of turns that [Limiter] keeps in memory
// and the distributed package keeps in Redis (its script mirrors the
// schedule's files rule for rule, and takes its constants from
// [ScheduleConstants]). This file holds the model, its constants and its
// state; schedule_line.go the queues, schedule_window.go the server's
// window and the cut, schedule_turns.go the turns and advance,
// schedule_ops.go the operations, schedule_settle.go settled costs, and
// schedule_limits.go and schedule_xlimit.go several limits per key.
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
	// CutBeta: a cut multiplies the pace by this (AWS SDKs' and CUBIC's β).
	CutBeta = 0.7
	// cutFloor: no cut goes below this fraction of its reference rate.
	cutFloor = 0.25
	// cutMinRequests: nor below this many requests a second (in units: times
	// the rejected request's cost), so that a floor is in requests.
	cutMinRequests = 1.0
	// CutRecover: a cut regrows to its reference rate over this long, in
	// steps of cutStep, and is over then.
	CutRecover = 2.0
	CutStep    = 0.25
	// strikeWindow: a lone rejection under a known limit only shifts the
	// schedule (timer jitter against a strict server); a second one within
	// strikeWindow cuts.
	strikeWindow = 10.0
	// shiftSlots: intervals a lone rejection shifts the schedule by.
	shiftSlots = 1.0
	// A rejection under a known limit with no cut in force trims the
	// pace by TrimStep of it, up to trimMax, instead of cutting it: a
	// strict server (no burst, a limit told exactly) rejects what timer
	// jitter brings early, and the margin it needs is learned. Units that
	// go give it back, a step per 1/trimTarget − 1 units (so that it
	// rests where about trimTarget of the requests are rejected); a key
	// that has had no rejection for trimKeep forgets it. A rejection past trimMax (an outage, a budget below the
	// limit) cuts, and the cut, which regrows, replaces the trim.
	TrimStep   = 0.01
	TrimMax    = 0.1
	TrimTarget = 0.01
	TrimKeep   = 60.0
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

// Constants returns the schedule's constants by the names the
// distributed package's Lua script uses, times in seconds. It exists so
// that the script's rules share this file's numbers; it is not meant for
// other callers.
func Constants() map[string]float64 {
	return map[string]float64{
		"PROBE_WAIT":    probeWait,
		"WINDOW_KEEP":   windowKeep,
		"SAME_WINDOW":   sameWindow,
		"CUT_BETA":      CutBeta,
		"CUT_FLOOR":     cutFloor,
		"CUT_MIN_REQ":   cutMinRequests,
		"CUT_RECOVER":   CutRecover,
		"CUT_STEP":      CutStep,
		"CUT_PROBE":     cutProbe,
		"CUT_GROW":      cutGrow,
		"STRIKE_WINDOW": strikeWindow,
		"SHIFT_SLOTS":   shiftSlots,
		"TRIM_STEP":     TrimStep,
		"TRIM_MAX":      TrimMax,
		"TRIM_TARGET":   TrimTarget,
		"TRIM_KEEP":     TrimKeep,
		"PENDING_IDLE":  pendingIdle,
		"MAX_STEPS":     maxSteps,
		"LOW_SHARE":     lowShare,
		"LOW_UNITS":     lowUnits,
		"MAX_HOLES":     maxHoles,
		"HIDDEN_AGREE":  hiddenAgree,
		"HIDDEN_KEEP":   hiddenKeep,
		"HIDDEN_TIGHT":  hiddenTight,
		"HIDDEN_STEP":   hiddenStep,
	}
}

// State is one key's state. Its methods take the time now, the
// configured pace (interval per unit, 0 for none, and burst) and sec.
type State struct {
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
	return s.q[Retry].live() + s.q[First].live()
}

// probe returns the units a window probe may carry: the largest cost of a
// wait on the key, so that any wait fits in one probe.
func (s *State) probe(c Config) float64 {
	return max(s.maxCost, 1)
}
