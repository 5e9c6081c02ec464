package schedule

import "math"

// The operations of a key's schedule as one entry, Apply: the ops of the
// distributed package's script (schedule_ops.lua), op for op, so that a
// store that keeps the state elsewhere and the in-process Limiter run one
// set of rules. Each op is built from the State's methods; Apply adds only
// what an op is made of (their order, a refusal past the max wait, a
// lease's turns in a row) and the write-back's tidying (tidy).
//
// # Units
//
// Times are in schedule units (Config.Sec a second), absolute: Reply
// holds turns, not waits. The script replies µs integers relative to its
// clock; with Sec = 1e6 and the script's now, the mapping is
//
//	wait µs     = WaitOf(now, turn): 0 if turn ≤ now, else ⌈turn − now⌉
//	recheck µs  = WaitOf(now, Recheck), or −1 for +Inf
//	pause µs    = WaitOf(now, Until) (ops pause and adapt)
//	settle      = Dropped (each)
//	gone ticket = −1 (Turns −Inf), lost state = −2 (Turns NaN)
//	reset µs    = WaitOf(now, Reset), appended when Learned
//
// and the state op's view from View: ⌊Tokens·1e6⌋, ⌊Remaining⌋, the
// waits of Next and Hold, Queued, ⌊1e6/Interval·1e6 + ½⌋, ⌊Burst·1e6⌋,
// Cut, Window, ⌊WindowLeft·1e6⌋ and WindowReset's wait (+Inf: 2^53);
// mstate's ⌊Remaining·1e6⌋ each; every µs and scaled number at most
// 2^62 in size (the script's FAR). The state id and the TTL are the
// store's: Apply has neither.
//
// # State
//
// Apply keeps the state as the script writes it back (tidy): the suite
// in the distributed package compares them field by field (Fields). A
// state the script keeps none of (a give-back or a refused try on a key
// without one) is one the engine finds Idle.

// Op is one operation: a value of one of the types below.
type Op interface{ isOp() }

// Known is what a process knew of a key's state that the store lost (a
// restart, an eviction): its last turn and a pause, relative to now (0:
// none). A wait or lease that carries it seeds the new state from it.
type Known struct {
	Floor float64 // the process's last turn, from now
	Hold  float64 // its known pause, from now
}

// Wait takes a ticket of N units in Queue (Retry or First), refused with
// nothing kept if its turn is MaxWait or more from now (and not now), or
// (Reply.Full) if it queues (its turn is not now) and the units queued,
// its own with them, would be more than MaxQueued. Cost is its cost in
// the key's further limits (nil: none; the script's mwait). Seed, if
// set, is what the process knew of a state the store lost.
type Wait struct {
	N         int64
	Queue     int
	MaxWait   float64 // +Inf: no bound
	MaxQueued int64   // 0: no bound
	Cost      []float64
	Seed      *Known
}

// Turns asks for the turns of tickets of the current state; Lost: they
// came from a state the store lost (each is replied as such).
type Turns struct {
	Tickets []Ticket
	Lost    bool
}

// Ticket is a ticket's place: the end of its units in Queue.
type Ticket struct {
	Queue int
	End   int64
}

// Cancel gives back the ticket (Queue, End) of N units, if it has not
// gone; Lost: it came from a state the store lost (nothing to give back).
type Cancel struct {
	Ticket
	N    int64
	Lost bool
}

// Pause holds every turn until D from now (never shortening a longer
// hold).
type Pause struct{ D float64 }

// Accepted values of Adapt.
const (
	AcceptedNone   = 0 // no acceptance told
	AcceptedUnit   = 1 // the server took a unit sent past a learned window's reset
	AcceptedStated = 2 // a refusal that also stated a limit of the server's own
)

// Adapt applies what a response said: the script's op adapt, its ten
// arguments by name.
type Adapt struct {
	Cost  float64 // the request's cost (at least 1 counts)
	Pause float64 // a pause from now; 0: none
	// Window: the response told a window: Left units until Reset from
	// now, of Size (0: unknown) per Length (0: unknown).
	Window                    bool
	Left, Reset, Size, Length float64
	// Rejected: a bare rejection (no Retry-After) of a request sent
	// RejectAge ago.
	Rejected  bool
	RejectAge float64
	Refused   bool    // a refusal that said when to come back
	Age       float64 // the request's age (0: unknown)
	Accepted  int     // AcceptedNone, AcceptedUnit or AcceptedStated
	// Declared: the pace the server declares, an interval per unit and
	// a burst, which a key with no configured pace adopts. Available:
	// what the server's bucket holds (HasAvailable), which caps the
	// key's. Both are the in-process Limiter's: the script has neither.
	Declared                        bool
	DeclaredInterval, DeclaredBurst float64
	HasAvailable                    bool
	Available                       float64
}

// Settle amends a wait that spent Spent units of the first limit: it
// cost Actual (both ≥ 0), and Diff (actual − spent) in each further
// limit (nil: none; the script's msettle when set). Each charge is
// bounded by what its limit holds at once (the first limit's burst, a
// further limit's Most): a request cannot have cost more than that beyond
// what it was admitted for; the rest is dropped (Reply.Dropped).
type Settle struct {
	Spent, Actual float64
	Diff          []float64
}

// Try lets N units in Queue go now if their turn has come, and otherwise
// changes nothing.
type Try struct {
	N     int64
	Queue int
	Cost  []float64
	Seed  *Known
}

// Lease takes up to K tickets of one unit in the first queue, as K waits
// in a row would, after giving back the tickets Back (of the current
// state; BackLost: of a state the store lost, ignored): each not yet due
// as Cancel gives it back, the spent ones settled to no cost while
// nothing is queued. The first Need are for waits queued in the process,
// kept while their turn is within MaxWait; the rest for waits expected
// at Rate units a second, the j-th kept only if its turn is no earlier
// than its expected arrival (j/Rate from now) less Late, and only while
// nothing but the bucket and the hold applies.
type Lease struct {
	K, Need  int
	MaxWait  float64 // +Inf: no bound
	Rate     float64
	Late     float64
	Seed     *Known
	Back     []int64
	BackLost bool
}

// StateView reads the key's state (the script's op state, or mstate when
// Limits is set): it changes nothing.
type StateView struct{ Limits bool }

func (Wait) isOp()      {}
func (Turns) isOp()     {}
func (Cancel) isOp()    {}
func (Pause) isOp()     {}
func (Adapt) isOp()     {}
func (Settle) isOp()    {}
func (Try) isOp()       {}
func (Lease) isOp()     {}
func (StateView) isOp() {}

// Reply is what an op replied; fields an op does not set are zero.
type Reply struct {
	// OK: Wait, Try, Lease: a ticket was given (Try: the units went);
	// Cancel: the units came back.
	OK bool
	// Full: Wait: refused (OK false) for its MaxQueued, its turn within
	// MaxWait.
	Full bool
	// Turn: Wait, Try: the ticket's turn (Try refused: the turn a wait
	// would have had).
	Turn float64
	End  int64 // Wait, Try, Lease: the (last) ticket's end
	// Recheck: Wait, Turns, Lease: when a sleeping wait must ask again
	// (a cut's step); +Inf: never.
	Recheck float64
	// Learned: the key has a learned budget's window, which resets at
	// Reset (Wait with OK, Turns, Lease).
	Learned bool
	Reset   float64
	// Until: Pause: the hold's end; Adapt: the pause it set (now + its
	// pause, or earlier for a learned budget's refused probe; 0: none).
	Until float64
	// Turns: Turns: each ticket's turn, no earlier than now (−Inf: gone;
	// NaN: Lost; now for a ticket given back, which no queued ticket ends
	// at); Lease: the turn of each ticket given, or of the refused first.
	Turns []float64
	View  *View       // StateView
	Views []LimitView // StateView with Limits
	// Dropped: Settle: the units of each charge dropped past its bound,
	// the first limit's then the further limits' (with Diff).
	Dropped []float64
	// Moved: queued turns may have moved (a sleeping wait must ask
	// again): the script publishes it.
	Moved bool
}

// WaitOf returns the script's wait for a turn t at now: 0 if it has
// come, else ⌈t − now⌉.
func WaitOf(now, t float64) float64 {
	if t <= now {
		return 0
	}
	return math.Ceil(t - now)
}

// refusedAt reports whether a turn t at now is past maxWait: its wait is
// maxWait or more, and not 0.
func refusedAt(now, t, maxWait float64) bool {
	wt := WaitOf(now, t)
	return wt >= maxWait && wt > 0
}

// Apply applies op to the key's state at now under c, as the script's op
// of the same name does, and returns its reply.
func (s *State) Apply(now float64, c Config, op Op) Reply {
	var r Reply
	switch o := op.(type) {
	case Wait:
		r = s.applyWait(now, c, o)
	case Turns:
		s.Advance(now, c)
		r.Turns = make([]float64, len(o.Tickets))
		for i, t := range o.Tickets {
			switch {
			case o.Lost:
				r.Turns[i] = math.NaN()
			case s.Gone(t.Queue, t.End):
				r.Turns[i] = math.Inf(-1)
			default:
				// A ticket given back and not queued (a key with further
				// limits finds none in its walk): as good as come.
				r.Turns[i] = max(s.Turn(now, c, t.Queue, t.End), now)
			}
		}
		r.Recheck = s.Recheck(now, c)
		r.Learned, r.Reset = s.win.rolls, s.win.reset
	case Cancel:
		s.Advance(now, c)
		if !o.Lost && s.Cancel(now, o.Queue, o.End, o.N) {
			// The tickets behind move up; the queue's last ticket moves
			// none, unless it is a retry's with first attempts behind it,
			// or further limits' walks take every ticket.
			r.OK = true
			r.Moved = s.x != nil || o.End < s.q[o.Queue].end || s.behind(o.Queue)
		}
	case Pause:
		s.Advance(now, c)
		r.Moved = s.Pause(now + o.D)
		r.Until = s.hold
	case Adapt:
		r = s.applyAdapt(now, c, o)
	case Settle:
		actual, dropped := s.Clamp(c, o.Spent, o.Actual)
		r.Dropped = []float64{dropped}
		s.Advance(now, c)
		r.OK = true
		r.Moved = s.Settle(now, c, o.Spent, actual)
		if o.Diff != nil {
			diff := append([]float64(nil), o.Diff...)
			x := s.ClampLimits(diff)
			if x == nil {
				x = make([]float64, len(diff))
			}
			r.Dropped = append(r.Dropped, x...)
			if s.SettleLimits(now, diff) {
				r.Moved = true
			}
		}
	case Try:
		s.seed(now, c, o.Seed)
		s.Advance(now, c)
		// A try that goes with a larger cost than any before moves the
		// turns queued past a window or under a cut, as enqueue says.
		grew := float64(o.N) > s.maxCost && (s.win.valid || s.cut.r0 != 0) && s.Queued() > 0
		r.OK, r.Turn = s.Try(now, c, o.Queue, o.N, o.Cost)
		if r.OK {
			r.End = s.q[o.Queue].rel
			r.Moved = grew
		}
	case Lease:
		r = s.applyLease(now, c, o)
	case StateView:
		t := s.clone()
		t.Advance(now, c)
		if o.Limits {
			t.LimitsView(now, c, &r.Views)
		} else {
			v := t.View(now, c)
			r.View = &v
		}
		return r // read only
	}
	if s.Sped() {
		r.Moved = true
	}
	s.tidy(now, c)
	return r
}

// seed carries what a process knew of a lost state into this one (k nil:
// nothing): its last turn, as a bucket spent until then, and its pause.
func (s *State) seed(now float64, c Config, k *Known) {
	if k == nil {
		return
	}
	if k.Floor > 0 {
		interval, burst := s.Base(c)
		s.tat = max(s.tat, now+k.Floor+burst*interval)
	}
	if k.Hold > 0 {
		s.hold = max(s.hold, now+k.Hold)
	}
}

// WaitNow is Apply of Wait{N: n, Queue: qi, Cost: cost} (no seed) for a
// wait that goes at once, without building its reply: the in-process
// Limiter's common wait, a key nothing holds back. ok: the wait went, as
// Apply's reply would say (OK, Turn now, End e, Moved moved); else
// nothing but the advance to now changed, and the wait goes through
// Apply.
func (s *State) WaitNow(now float64, c Config, qi int, n int64, cost []float64) (e int64, moved, ok bool) {
	s.Advance(now, c)
	if e, ok = s.GoNow(now, c, qi, n, cost); !ok {
		return 0, false, false
	}
	moved = s.Sped()
	s.tidy(now, c)
	return e, moved, true
}

func (s *State) applyWait(now float64, c Config, o Wait) Reply {
	var r Reply
	s.seed(now, c, o.Seed)
	s.Advance(now, c)
	if e, ok := s.GoNow(now, c, o.Queue, o.N, o.Cost); ok {
		// The common wait of a key nothing holds back: enqueue, turn and
		// advance in one step, to the same state (WaitNow).
		r.OK, r.Turn, r.End, r.Recheck = true, now, e, math.Inf(1)
		return r
	}
	e, moved := s.Enqueue(now, c, o.Queue, o.N, o.Cost)
	r.Moved = moved
	t := s.Turn(now, c, o.Queue, e)
	r.Turn = t
	if refusedAt(now, t, o.MaxWait) {
		s.Cancel(now, o.Queue, e, o.N)
		r.Recheck = math.Inf(1)
		return r
	}
	if o.MaxQueued > 0 && t > now && s.Queued() > o.MaxQueued {
		s.Cancel(now, o.Queue, e, o.N)
		r.Full, r.Recheck = true, math.Inf(1)
		return r
	}
	if t <= now {
		s.Advance(now, c)
	}
	if s.behind(o.Queue) {
		// A retry goes ahead of first attempts already waiting, and a
		// class's ticket may go ahead of another class's (classes.go).
		r.Moved = true
	}
	r.OK, r.End = true, e
	r.Recheck = s.Recheck(now, c)
	r.Learned, r.Reset = s.win.rolls, s.win.reset
	return r
}

func (s *State) applyAdapt(now float64, c Config, o Adapt) Reply {
	var r Reply
	s.Advance(now, c)
	cost := max(o.Cost, 1)
	s.Answered(cost)
	sentAt := now - o.Age
	if o.Pause > 0 {
		until := now + o.Pause
		if o.Refused && !o.Window && o.Accepted != AcceptedStated {
			var m bool
			until, m = s.BudgetRefused(now, sentAt, cost, o.Pause, c)
			r.Moved = r.Moved || m
		}
		r.Until = max(until, now)
		if s.Pause(until) {
			r.Moved = true
		}
		if o.Refused && s.Refused(now, c) {
			r.Moved = true
		}
	}
	if o.Accepted == AcceptedUnit && s.BudgetAccepted(now, sentAt, c) {
		r.Moved = true
	}
	if o.Declared && c.Interval == 0 {
		s.Declare(now, c, o.DeclaredInterval, o.DeclaredBurst)
		r.Moved = true
	}
	if o.Window {
		s.Window(now, max(o.Left, 0), o.Reset, o.Size, o.Length, c)
		r.Moved = true
	}
	if o.HasAvailable && s.Level(now, c, o.Available) {
		r.Moved = true
	}
	if o.Rejected && s.Reject(now, now-o.RejectAge, o.Cost, c) {
		r.Moved = true
	}
	return r
}

func (s *State) applyLease(now float64, c Config, o Lease) Reply {
	var r Reply
	s.seed(now, c, o.Seed)
	s.Advance(now, c)
	if len(o.Back) > 0 && !o.BackLost {
		q := &s.q[First]
		spent := 0.0
		for i := len(o.Back) - 1; i >= 0; i-- { // the tail's first
			e := o.Back[i]
			switch {
			case e > q.rel && e <= q.end:
				if e != q.end || s.behind(First) {
					// The tickets behind move up: the queue's, and the
					// other classes' that the merge put behind it
					// (classes.go), as a cancel's.
					r.Moved = true
				}
				s.Cancel(now, First, e, 1)
			case e <= q.rel:
				spent++
			}
		}
		// Spent turns went unused: settled to no cost while nothing is
		// queued and no pause holds, so that no turn moves; otherwise
		// they stay spent.
		if spent > 0 && s.Queued() == 0 && now >= s.hold {
			s.Settle(now, c, spent, 0)
		}
		if spent > 0 && s.hb.on {
			s.hb.n = max(s.hb.n-spent, 0) // never sent: no budget's units
		}
	}
	// With nothing but the bucket and the hold, the turns past the first
	// are turnAt's closed form at consecutive positions. A key counting a
	// hidden budget's cycles leases only for the waits queued: a turn
	// leased ahead and left unused would count as sent.
	simple := !s.win.valid && s.cut.r0 == 0 && !s.hb.on && !s.behind(First)
	iv, tau := s.Pace(now, c)
	var p1, from float64
	due := false
	var last int64
	for j := 1; j <= o.K; j++ {
		var e int64
		var t float64
		if j == 1 || !simple {
			var m bool
			e, m = s.Enqueue(now, c, First, 1, nil)
			r.Moved = r.Moved || m
			t = s.Turn(now, c, First, e)
			p1, from = float64(s.position(First, e)), max(s.tat, s.hold)
		} else {
			e = s.q[First].take(1)
			t = s.hold
			if iv > 0 {
				t = max(s.hold, from+((p1+float64(j)-1)*iv-tau)) // head's turn
			}
		}
		wt := WaitOf(now, t)
		var keep bool
		if j <= o.Need {
			keep = !refusedAt(now, t, o.MaxWait)
		} else {
			keep = simple && o.Rate > 0 && float64(j-o.Need)*c.Sec/o.Rate <= wt+o.Late
		}
		if !keep {
			s.Cancel(now, First, e, 1) // the tail's: taken back outright
			if j == 1 {
				r.Turns = []float64{t}
			}
			break
		}
		r.Turns = append(r.Turns, t)
		last = e
		if s.behind(First) {
			// The merge may put the ticket ahead of another class's
			// tickets (classes.go): their turns move later, as a wait's
			// ticket moves them.
			r.Moved = true
		}
		if wt == 0 {
			due = true
		}
	}
	if due {
		s.Advance(now, c)
	}
	if last != 0 {
		r.OK, r.End = true, last
		r.Recheck = s.Recheck(now, c)
	} else {
		r.Recheck = math.Inf(1)
	}
	r.Learned, r.Reset = s.win.rolls, s.win.reset
	return r
}

// tidy is the write-back's: a cut fully over (regrown, its strike
// window past) with no trim is the state of a key never cut; the units
// a window counted past its reset count for a learned budget's window
// only; and a state with nothing beyond its core (no holes, tickets of
// several units, window, cut, trim, hidden budget, further limits or
// declared pace) keeps no pace last in force, no map of earlier
// arrivals and no trim count: the next advance starts them from the pace
// in force, which is then the configured one, and a window learned later
// has no turn before now, where the map would apply.
func (s *State) tidy(now float64, c Config) {
	if s.cut.moved && s.cut.rate(now, c.Sec) == 0 && now-s.cut.last > strikeWindow*c.Sec && s.trim == 0 {
		s.cut = cut{}
	}
	if !s.win.rolls {
		s.win.past = 0
	}
	lists := 0
	for qi := range s.q {
		lists += len(s.q[qi].holes) + len(s.q[qi].big)
	}
	if lists == 0 && !s.win.valid && !s.cut.moved &&
		s.trim == 0 && s.x == nil && !s.hb.on && s.dInt == 0 {
		s.credInt, s.credTau, s.spAt, s.spK, s.spRho, s.trimGone = 0, 0, 0, 0, 0, 0
	}
}

// clone returns a copy of s that ops may change without changing s.
func (s *State) clone() *State {
	t := *s
	if s.x != nil {
		x := *s.x
		x.lim = append([]Limit(nil), s.x.lim...)
		x.dueLim = make([]Limit, len(x.lim))
		x.scratch = make([]Limit, len(x.lim))
		x.saved = make([]Limit, len(x.lim))
		for qi := range x.q {
			q := &x.q[qi]
			q.e, q.n, q.c = append([]int64(nil), q.e...), append([]int64(nil), q.n...), append([]float64(nil), q.c...)
		}
		t.x = &x
	}
	for qi := range t.q {
		t.q[qi].holes = append([]span(nil), t.q[qi].holes...)
		t.q[qi].big = append([]span(nil), t.q[qi].big...)
	}
	return &t
}
