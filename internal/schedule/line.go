package schedule

import "slices"

// The schedule's queues (see schedule.go): tickets as ranges of unit
// numbers, cancelled ones as holes.

// The queues: retries go ahead of first attempts, which wait in three
// classes (classes.go): First is the default class's.
const (
	Retry      = 0
	First      = 1
	Critical   = 2
	Background = 3
	Queues     = 4
)

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

// sizeAt returns the units of the queued ticket ending at e.
func (q *line) sizeAt(e int64) int64 {
	for _, b := range q.big {
		if b.end == e {
			return b.n
		}
		if b.end > e {
			break
		}
	}
	return 1
}

// lastRank returns the rank (1-based, among the live units from the
// head) of the last unit of the ticket that holds the x-th live unit; the
// live units if x is past them.
func (q *line) lastRank(x int64) int64 {
	if live := q.live(); x >= live {
		return live
	}
	for _, b := range q.big {
		hi := q.ahead(b.end)
		if hi-b.n >= x {
			break
		}
		if hi >= x {
			return hi
		}
	}
	return x
}
