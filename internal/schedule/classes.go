package schedule

import "math"

// Priority classes: a key's first attempts wait in three queues, one a
// class (Critical, First: the default, Background), behind the retries,
// which go first whatever their class. The classes share the key's
// turns by start-time fair queueing: every ticket has a tag, the
// virtual time its class starts it at,
//
//	tag = (vb[c] + r0) · stride[c]
//
// where r0 is the live units of its class ahead of it and vb[c] the
// class's virtual start of its head; the queues merge in tag order,
// ties by class (critical, default, background), FIFO within a class.
// A class's stride is the inverse of its weight: while classes are
// waiting, each gets a share of the units that go in proportion to its
// weight, so a class is never starved (background gets at least
// 1/(1 + 4 + 16) of the key's pace; see strides), and a class that had
// nothing queued starts at the least head tag of the classes waiting
// (rounded up to its stride): a critical wait behind any number of
// default and background ones is next in line.
//
// Tags are exact (integers times strides that are powers of two), so
// the merge is a total order: a ticket's position is its class's units
// ahead of it, its own with them, plus the units of the other classes'
// tickets whose keys are less (before), plus the retries'. Turns stay
// derived from positions (schedule.go): a take moves later only the
// tickets whose keys are greater, a release removes a prefix of the
// merge (every position moves up by the units gone), and a cancel moves
// up what was behind it in its class (which may move another class's
// ticket later by at most a ticket's units: a sleeper wakes early and
// asks again, never late).
//
// A class with nothing queued keeps no virtual start (vb is 0), nor does
// the only class queued: a key whose waits are all of one class keeps
// the state it kept before classes.

// ClassQueue returns the queue of a class's first attempts: class 1 is
// critical, −1 background, anything else the default (as throttle.Priority
// numbers them).
func ClassQueue(class int) int {
	switch class {
	case 1:
		return Critical
	case -1:
		return Background
	}
	return First
}

// strides are each queue's stride (the Retry queue's is unused).
var strides = [Queues]float64{0, StrideDefault, StrideCritical, StrideBackground}

// classRank orders ties between tags: critical, default, background.
var classRank = [Queues]int{0, 1, 0, 2}

// classes returns how many class queues hold live units.
func (s *State) classes() int {
	n := 0
	for qi := First; qi < Queues; qi++ {
		if s.q[qi].live() > 0 {
			n++
		}
	}
	return n
}

// tagOf returns the tag of a ticket of class qi with r0 of its class's
// live units ahead of it.
func (s *State) tagOf(qi int, r0 int64) float64 {
	return (s.vb[qi] + float64(r0)) * strides[qi]
}

// before returns the live units of class o in tickets whose keys are less
// than a ticket of class qi with tag: those whose tags are less, or equal
// for a class that goes first on a tie; whole tickets.
func (s *State) before(qi int, tag float64, o int) int64 {
	q := &s.q[o]
	var r0 float64 // the largest r0 of a ticket of o ahead
	if classRank[o] < classRank[qi] {
		r0 = math.Floor(tag/strides[o]) - s.vb[o]
	} else {
		r0 = math.Ceil(tag/strides[o]) - 1 - s.vb[o]
	}
	if r0 < 0 {
		return 0
	}
	live := q.live()
	if r0 >= float64(live) {
		return live
	}
	return q.lastRank(int64(r0) + 1)
}

// others returns the units of the other classes ahead of a ticket of
// class qi with r0 of its class's units ahead of it.
func (s *State) others(qi int, r0 int64) int64 {
	tag := s.tagOf(qi, r0)
	var p int64
	for o := First; o < Queues; o++ {
		if o != qi && s.q[o].live() > 0 {
			p += s.before(qi, tag, o)
		}
	}
	return p
}

// enterClass starts class qi's virtual time before a take, if it has
// nothing queued: at the least head tag of the classes waiting, so that
// its first ticket goes no later than their heads' (and before them on
// a tie, if it is the higher class).
func (s *State) enterClass(qi int) {
	if qi == Retry || s.q[qi].live() > 0 {
		return
	}
	least := math.Inf(1)
	for o := First; o < Queues; o++ {
		if o != qi && s.q[o].live() > 0 {
			least = min(least, s.vb[o]*strides[o])
		}
	}
	s.vb[qi] = 0
	if !math.IsInf(least, 1) {
		s.vb[qi] = math.Ceil(least / strides[qi])
	}
}

// tidyClasses forgets the virtual starts no merge needs: a class with
// nothing queued, and the only class queued.
func (s *State) tidyClasses() {
	n := 0
	for qi := First; qi < Queues; qi++ {
		if s.q[qi].live() == 0 {
			s.vb[qi] = 0
		} else {
			n++
		}
	}
	if n <= 1 {
		s.vb = [Queues]float64{}
	}
}

// releaseClasses lets at most k live units of the class queues go, in
// the merge's order and whole tickets only, from qs (copies of s.q that
// s's own lines still describe), and returns how many went and, by
// class, the units by which its virtual start moves (s.vb is left as it
// is: the turns are still read from s). Each class lets go its tickets
// whose positions among the classes are at most k: the merge's prefix.
func (s *State) releaseClasses(qs *[Queues]line, k int64) (gone int64, m [Queues]int64) {
	if s.classes() <= 1 {
		for qi := First; qi < Queues; qi++ {
			gone += qs[qi].release(k - gone) // skips the holes at its head
		}
		return gone, m
	}
	for qi := First; qi < Queues; qi++ {
		q := &s.q[qi]
		live := q.live()
		// The largest rank whose ticket's position is at most k: the
		// positions grow with the rank.
		lo, hi := int64(0), live
		for lo < hi {
			mid := (lo + hi + 1) / 2
			last := q.lastRank(mid)
			first := last - q.sizeAt(q.unitAt(last)) + 1
			if last+s.others(qi, first-1) <= k {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		if lo > 0 {
			m[qi] = q.lastRank(lo)
		}
	}
	for qi := First; qi < Queues; qi++ {
		gone += qs[qi].release(m[qi]) // skips the holes at its head
	}
	return gone, m
}

// unitAt returns the unit number of the live unit of rank r (1-based
// from the head).
func (q *line) unitAt(r int64) int64 {
	u := q.rel + r
	for _, h := range q.holes {
		if h.end-h.n >= u {
			break
		}
		u += h.n
	}
	return u
}

// behind reports whether a ticket of queue qi, taken or given back,
// moves the turns of another queue's tickets: a retry's, those of the
// classes waiting; a class's, those of the other classes waiting.
func (s *State) behind(qi int) bool {
	for o := First; o < Queues; o++ {
		if o != qi && s.q[o].live() > 0 {
			return true
		}
	}
	return false
}
