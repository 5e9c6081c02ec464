package schedule

import "math"

// Several limits on one key: the schedule's model of turns (schedule.go)
// with more limits, each in a unit of its own.
//
// # State
//
// A key with [Limiter.Limits] keeps, besides its schedule (the first limit,
// Limit and Burst, in the unit WaitN counts, with its pauses, server
// windows and cuts), the state of each further limit (schedule_xlimit.go:
// a bucket's tat, or a configured window's counts), and for every queued
// ticket its cost in each of those limits (extras.q, in queue order:
// retries first). A single-bucket key has none of it (schedule.x is nil)
// and runs the schedule's closed forms and fast paths unchanged; so does
// the script (op mwait, the general path).
//
// # Turns
//
// A ticket's turn is the latest among the limits, FIFO: walking the
// tickets from the head, the j-th's turn t_j is the least time no earlier
// than
//
//	t_{j−1},  turn(p_j),  chain_{j−1} + n_j·I − τ
//
// at which every further limit L lets its cost c_jL go (the least fixed
// point of each limit's earliest time: every rule is monotone, so a
// few passes find it). turn(p_j) is the schedule's turn of the ticket's
// first-limit position (hold, server window, cut, its bucket:
// schedule.turnAt); chain is the first limit's bucket seen from the
// tickets' turns. When the ticket goes at t_j, each limit records its
// units there, as GCRA does for a bucket:
//
//	tat_L ← max(tat_L, t_j) + c_jL·I_L        chain_j = max(chain_{j−1}, t_j) + n_j·I
//
// (a window counts them in t_j's window), so that, as for the server's
// window (schedule.tatAfter), units that one limit held back claim no
// credit on the others from before they could go: a ticket arrives at
// every limit at its turn, not earlier. The schedule's closed form
// counts the first limit's chains from the head and the server window's
// turns; the max of both is GCRA's tat, since every chain is a max of
// arrivals plus units. A limit a ticket spends nothing of does not hold
// it back.
//
// t_0 is the time of the last change that may have moved queued turns
// earlier (an enqueue, a cancel, a server window, a faster pace, a
// settle: extras.moved): no queued ticket goes before it, so one that a
// hole or a window moved up arrives when that happened, as a wait's
// ideal turn is after its call and after the wait ahead left. Not now: a
// wait that wakes late (timer slack, a round trip) went at its turn, and
// its lateness does not add up along the queue.
//
// Turns are derived from the state, never stored, as in the schedule: a
// cancelled ticket leaves the walk and its units come back at once on
// every limit (the tickets behind move up), exact on all of them; a
// pause moves every turn. Units go in queue order, whole tickets only,
// on all limits at once or on none (advance): the tickets whose turns
// have come go, the schedule spends their first-limit units, each limit
// records its own as above, and the first limit's tat is at least the
// chain. The walk costs a pass over the tickets ahead; a key whose queue
// is empty and whose limits all let the cost go at once goes without it
// (goNowX), as a single bucket does.

// extras are the further limits of a key and its queued tickets' costs in
// them.
type extras struct {
	lim []Limit
	q   [Queues]xqueue
	// The state after the tickets due at the last walk (due), for commit.
	dueLim   []Limit
	dueChain float64
	dueN     [Queues]int
	// floor: no queued ticket goes before it (see moved).
	floor   float64
	scratch []Limit // the walk's limits
	saved   []Limit // the limits save kept
}

// xqueue holds a queue's tickets in order from head: e (the ticket's end
// in the schedule's line), n (its first-limit units) and, k = len(lim) a
// ticket, its costs.
type xqueue struct {
	head int
	e, n []int64
	c    []float64
}

func (q *xqueue) len() int { return len(q.e) - q.head }

func (q *xqueue) cost(i, k int) []float64 { return q.c[i*k : (i+1)*k] }

// push appends a ticket.
func (q *xqueue) push(e, n int64, c []float64) {
	q.e, q.n, q.c = append(q.e, e), append(q.n, n), append(q.c, c...)
}

// pop drops m tickets from the head.
func (q *xqueue) pop(m int) {
	q.head += m
	if q.head == len(q.e) { // empty: reuse the arrays from the start
		q.head, q.e, q.n, q.c = 0, q.e[:0], q.n[:0], q.c[:0]
	}
}

// find returns the index of the ticket ending at e, or -1.
func (q *xqueue) find(e int64) int {
	for i := q.head; i < len(q.e); i++ {
		if q.e[i] == e {
			return i
		}
	}
	return -1
}

// remove drops the ticket at index i.
func (q *xqueue) remove(i, k int) {
	q.e = append(q.e[:i], q.e[i+1:]...)
	q.n = append(q.n[:i], q.n[i+1:]...)
	q.c = append(q.c[:i*k], q.c[(i+1)*k:]...)
	q.pop(0)
}

func newExtras(lim []Limit) *extras {
	x := &extras{lim: lim, floor: math.Inf(-1)}
	for i := range x.lim {
		x.lim[i].tat, x.lim[i].idx = math.Inf(-1), math.Inf(-1) // full
	}
	x.dueLim = make([]Limit, len(lim))
	x.scratch = make([]Limit, len(lim))
	x.saved = make([]Limit, len(lim))
	return x
}

// moved records that queued turns may move earlier at now (a window,
// a faster pace, units given back): no queued ticket goes before now, so
// that one whose turn moves into the past claims no credit on the
// further limits from before it could go. nil-safe.
func (x *extras) moved(now float64) {
	if x != nil {
		x.floor = max(x.floor, now)
	}
}

// fits reports whether every further limit holds cost at now.
func (x *extras) fits(now float64, cost []float64) bool {
	for i := range x.lim {
		l := &x.lim[i]
		if cost[i] <= 0 || !l.limits() {
			continue
		}
		if l.kind == KindBucket {
			// (tat − now) + (c − burst)·interval: see goNow.
			if (max(l.tat, now)-now)+(cost[i]-l.burst)*l.interval > 0 {
				return false
			}
		} else if l.earliest(now, cost[i]) > now {
			return false
		}
	}
	return true
}

// spend spends cost at now on every further limit.
func (x *extras) spend(now float64, cost []float64) {
	for i := range x.lim {
		if cost[i] > 0 {
			x.lim[i].take(now, cost[i])
		}
	}
}

// idle reports whether every further bucket is full at now.
func (x *extras) idle(now float64) bool {
	for i := range x.lim {
		if !x.lim[i].full(now) {
			return false
		}
	}
	return true
}

// walk computes the turns of the queued tickets in queue order (see
// above), calling f with each ticket's queue, index and turn until f
// returns false. It leaves the limits after the last ticket f accepted
// in x.scratch and returns the chain then.
func (x *extras) walk(s *State, now float64, c Config, f func(qi, i int, t float64) bool) float64 {
	k := len(x.lim)
	iv, tau := s.Pace(now, c)
	lims := x.scratch
	copy(lims, x.lim)
	// A queued ticket goes no earlier than floor (prev): one whose turn
	// passed while it waited behind others (a hole ahead of it moved it up)
	// arrives at the buckets when the hole was made, claiming no credit
	// from before. Not now: a wait that wakes late (timer slack) went at
	// its turn, and its lateness does not add up along the queue.
	chain, prev, p := math.Inf(-1), x.floor, 0.0
	var at [Queues]int   // each queue's next ticket
	var r0 [Queues]int64 // the units of each class walked
	for qi := range x.q {
		at[qi] = x.q[qi].head
	}
	for {
		// Retries first, then the classes in the merge's order
		// (classes.go).
		qi := -1
		if at[Retry] < len(x.q[Retry].e) {
			qi = Retry
		} else {
			best := 0.0
			for o := First; o < Queues; o++ {
				if at[o] >= len(x.q[o].e) {
					continue
				}
				tag := s.tagOf(o, r0[o])
				if qi < 0 || tag < best || tag == best && classRank[o] < classRank[qi] {
					qi, best = o, tag
				}
			}
		}
		if qi < 0 {
			break
		}
		q := &x.q[qi]
		i := at[qi]
		at[qi]++
		r0[qi] += q.n[i]
		{
			n, cost := float64(q.n[i]), q.cost(i, k)
			p += n
			t := max(prev, s.TurnAt(now, c, p))
			if iv > 0 {
				t = max(t, chain+n*iv-tau)
			}
			// The least fixed point of every limit's earliest time (each
			// is monotone: see schedule_xlimit.go); a few passes at most.
			for range 2*k + 2 {
				moved := false
				for L := range lims {
					if cost[L] > 0 {
						if e := lims[L].earliest(t, cost[L]); e > t {
							t, moved = e, true
						}
					}
				}
				if !moved {
					break
				}
			}
			if !f(qi, i, t) {
				return chain
			}
			if iv > 0 {
				chain = max(chain, t) + n*iv
			}
			for L := range lims {
				if cost[L] > 0 {
					lims[L].take(t, cost[L])
				}
			}
			prev = t
		}
	}
	return chain
}

// turn returns the turn at now of the ticket (qi, e); -Inf if it has gone.
func (x *extras) turn(s *State, now float64, c Config, qi int, e int64) float64 {
	turn := math.Inf(-1)
	x.walk(s, now, c, func(qj, i int, t float64) bool {
		if qj == qi && x.q[qi].e[i] == e {
			turn = t
			return false
		}
		return true
	})
	return turn
}

// due returns the first-limit units of the tickets whose turns have come
// at now, whole tickets from the head, and keeps what they leave for
// commit.
func (x *extras) due(s *State, now float64, c Config) int64 {
	at := now + 1e-12*c.Sec // as dueUnits
	var units int64
	x.dueN = [Queues]int{}
	x.dueChain = x.walk(s, now, c, func(qi, i int, t float64) bool {
		if t > at {
			return false
		}
		units += x.q[qi].n[i]
		x.dueN[qi]++
		return true
	})
	copy(x.dueLim, x.scratch)
	return units
}

// commit applies the tickets due went at the last due: their costs on
// every limit, and the first limit's tat no earlier than their chain.
func (x *extras) commit(s *State) {
	copy(x.lim, x.dueLim)
	for qi := range x.q {
		x.q[qi].pop(x.dueN[qi])
	}
	s.tat = max(s.tat, x.dueChain)
	x.dueN = [Queues]int{}
}

// cancel gives back the ticket (qi, e): it leaves the walk, so its units
// come back on every limit. kept: the schedule's line kept its units
// queued (too many holes): the ticket stays, of its first-limit units
// only.
func (x *extras) cancel(now float64, qi int, e int64, kept bool) {
	q := &x.q[qi]
	i := q.find(e)
	if i < 0 {
		return
	}
	x.moved(now)
	k := len(x.lim)
	if kept {
		clear(q.cost(i, k))
		return
	}
	q.remove(i, k)
}

// GoNow lets a wait of n units (cost in the further limits) in queue qi
// go at once, if its queue is empty, the schedule lets its n units go and
// every further limit holds its cost (goNow). It returns the end of the
// ticket that went; ok is false, and nothing changed, if it did not go.
func (s *State) GoNow(now float64, c Config, qi int, n int64, cost []float64) (e int64, ok bool) {
	if s.x != nil && !s.x.fits(now, cost) || !s.goNow(now, c, qi, n) {
		return 0, false
	}
	if s.x != nil {
		s.x.spend(now, cost)
		s.x.moved(now) // as enqueue's ticket would
	}
	return s.q[qi].rel, true
}

// Enqueue is enqueue for a key with further limits: the ticket's costs
// join the walk.
func (s *State) Enqueue(now float64, c Config, qi int, n int64, cost []float64) (int64, bool) {
	e, moved := s.enqueue(now, c, qi, n)
	if s.x != nil {
		s.x.q[qi].push(e, n, cost)
		s.x.moved(now)
	}
	return e, moved
}

// xsaved is what try puts back: the queues' bounds and the buckets.
type xsaved struct {
	head, n [Queues]int
	floor   float64
}

// save returns the queues' bounds and keeps the buckets; nil-safe.
func (x *extras) save() xsaved {
	var v xsaved
	if x == nil {
		return v
	}
	for qi := range x.q {
		v.head[qi], v.n[qi] = x.q[qi].head, len(x.q[qi].e)
	}
	v.floor = x.floor
	copy(x.saved, x.lim)
	return v
}

// restore puts back what save kept: a ticket pushed since is dropped, and
// tickets popped since come back (pop and push reslice, never clear).
func (x *extras) restore(v xsaved) {
	if x == nil {
		return
	}
	k := len(x.lim)
	for qi := range x.q {
		q := &x.q[qi]
		q.head, q.e, q.n, q.c = v.head[qi], q.e[:v.n[qi]], q.n[:v.n[qi]], q.c[:v.n[qi]*k]
	}
	copy(x.lim, x.saved)
	x.floor = v.floor
}

// LimitView is one further limit as callers see it at an instant.
type LimitView struct {
	Window bool // a window (else a bucket)
	// Remaining is how many of its units a wait could spend at once,
	// once the waits queued have spent theirs (negative while they owe
	// more than it holds; +Inf for no limit).
	Remaining float64
}

// LimitsView returns, after Advance at now, the turn of a wait of one
// unit behind every queued wait on the further limits (-Inf: none
// queued; FIFO: it goes after them, whichever limit holds them), and, if
// views is not nil, appends each further limit's view to it. It changes
// nothing.
func (s *State) LimitsView(now float64, c Config, views *[]LimitView) (last float64) {
	x := s.x
	last = math.Inf(-1)
	if x == nil {
		return last
	}
	x.walk(s, now, c, func(_, _ int, t float64) bool {
		last = t
		return true
	})
	if views == nil {
		return last
	}
	for i := range x.scratch {
		l := &x.scratch[i] // the limits after the queued waits
		v := LimitView{Window: l.kind != KindBucket, Remaining: math.Inf(1)}
		switch {
		case l.kind == KindBucket && l.interval > 0:
			v.Remaining = min(l.burst, (now-l.tat+l.tau)/l.interval)
		case l.kind == KindFixed:
			_, cur := l.counts(math.Floor((now + l.off) / l.w))
			v.Remaining = l.q - cur
		case l.kind == KindFirst:
			v.Remaining = l.q
			if now < l.start+l.w {
				v.Remaining = l.q - l.cur
			}
		case l.kind == KindLog:
			v.Remaining = l.q - l.logUnits(now)
		case l.kind == KindSliding:
			i := math.Floor((now + l.off) / l.w)
			prev, cur := l.counts(i)
			v.Remaining = math.Floor(l.q - prev*(1-((now+l.off)/l.w-i)) - cur)
		}
		*views = append(*views, v)
	}
	return last
}
