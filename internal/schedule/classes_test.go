package schedule

import (
	"math"
	"math/rand/v2"
	"testing"
)

// classRun drives a key of 1 ms a unit, burst 1, with the waits of ops
// (queue and units, all taken at the start, in order) and returns the
// order in which the tickets went, checking at every ms that each
// ticket's turn is its position's and that the tickets go in the order
// of their turns.
func classRun(t *testing.T, s *State, c Config, now float64, ops []Ticket, sizes []int64) []int {
	t.Helper()
	ends := make([]int64, len(ops))
	for i, o := range ops {
		r := s.Apply(now, c, Wait{N: sizes[i], Queue: o.Queue, MaxWait: math.Inf(1)})
		if !r.OK {
			t.Fatalf("wait %d refused", i)
		}
		ends[i] = r.End
	}
	var order []int
	gone := make([]bool, len(ops))
	for step := 0; len(order) < len(ops) && step < 100000; step++ {
		now += c.Interval
		tickets := make([]Ticket, len(ops))
		for i := range ops {
			tickets[i] = Ticket{Queue: ops[i].Queue, End: ends[i]}
		}
		r := s.Apply(now, c, Turns{Tickets: tickets})
		for i, turn := range r.Turns {
			if !gone[i] && math.IsInf(turn, -1) {
				gone[i] = true
				order = append(order, i)
			}
		}
	}
	return order
}

// TestClassesCriticalNext: a critical wait taken behind 100 background
// ones goes next; 100 default ones behind them share the key with the
// background ones four to one; FIFO within each class.
func TestClassesCriticalNext(t *testing.T) {
	c := Config{Interval: 1000, Burst: 1, Sec: 1e6}
	var s State
	s.Init(nil)
	var ops []Ticket
	var sizes []int64
	for range 100 {
		ops, sizes = append(ops, Ticket{Queue: Background}), append(sizes, 1)
	}
	for range 100 {
		ops, sizes = append(ops, Ticket{Queue: First}), append(sizes, 1)
	}
	ops, sizes = append(ops, Ticket{Queue: Critical}), append(sizes, 1)
	s.Apply(1e12, c, Wait{N: 1, Queue: First, MaxWait: math.Inf(1)}) // the bucket spent
	order := classRun(t, &s, c, 1e12, ops, sizes)
	if len(order) != len(ops) {
		t.Fatalf("%d of %d went", len(order), len(ops))
	}
	if order[0] != 200 {
		t.Errorf("first to go: wait %d; want the critical one (200)", order[0])
	}
	last := map[int]int{Background: -1, First: 99}
	bg, def := 0, 0
	for k, i := range order {
		q := ops[i].Queue
		if q == Critical {
			continue
		}
		if i <= last[q] {
			t.Fatalf("wait %d of queue %d went after %d: not FIFO", i, q, last[q])
		}
		last[q] = i
		if k <= 100 {
			if q == Background {
				bg++
			} else {
				def++
			}
		}
	}
	// Of the first 100 after the critical one: 4 default to 1 background.
	if bg < 19 || bg > 21 {
		t.Errorf("of the first 100 units: %d background, %d default; want 20 and 80", bg, def)
	}
}

// TestClassesPositionsMatchRelease: random waits of 1–3 units in every
// queue, random cancels: at every step each ticket's turn is the turn
// of its position, and the tickets go in the order of their positions,
// each exactly once.
func TestClassesPositionsMatchRelease(t *testing.T) {
	c := Config{Interval: 1000, Burst: 2, Sec: 1e6}
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 7))
		var s State
		s.Init(nil)
		now := 1e12
		type tk struct {
			Ticket
			n    int64
			gone bool
		}
		var live []*tk
		for range 300 {
			switch r.IntN(6) {
			case 0, 1, 2:
				q := r.IntN(Queues)
				n := int64(1 + r.IntN(3))
				rep := s.Apply(now, c, Wait{N: n, Queue: q, MaxWait: math.Inf(1)})
				live = append(live, &tk{Ticket{Queue: q, End: rep.End}, n, rep.Turn <= now && s.Gone(q, rep.End)})
			case 3:
				if len(live) > 0 {
					k := live[r.IntN(len(live))]
					if !k.gone {
						s.Apply(now, c, Cancel{Ticket: k.Ticket, N: k.n})
						k.gone = true
					}
				}
			default:
				pos := map[*tk]int64{}
				for _, k := range live {
					if !k.gone {
						pos[k] = s.position(k.Queue, k.End)
					}
				}
				before := s.Queued()
				now += float64(r.IntN(3000))
				s.Advance(now, c)
				went := before - s.Queued()
				// The units that went are the first positions.
				for k, p := range pos {
					if g := s.Gone(k.Queue, k.End); g != (p <= went) {
						t.Fatalf("seed %d: ticket %+v at position %d gone %v; %d units went", seed, k.Ticket, p, g, went)
					}
				}
			}
			// Positions: a permutation of the live units, whole tickets.
			seen := map[int64]bool{}
			var total int64
			for _, k := range live {
				if k.gone || s.Gone(k.Queue, k.End) {
					k.gone = true
					continue
				}
				p := s.position(k.Queue, k.End)
				for u := p - k.n + 1; u <= p; u++ {
					if u < 1 || seen[u] {
						t.Fatalf("seed %d: ticket %+v (n %d) at position %d overlaps or is before the head", seed, k.Ticket, k.n, p)
					}
					seen[u] = true
				}
				total += k.n
			}
			if total != s.Queued() {
				t.Fatalf("seed %d: live tickets hold %d units, the queues %d", seed, total, s.Queued())
			}
			for u := int64(1); u <= total; u++ {
				if !seen[u] {
					t.Fatalf("seed %d: position %d held by no ticket (%d queued)", seed, u, total)
				}
			}
		}
	}
}

// TestClassesLeaseMoves: leased turns are first attempts of the default
// class, which the merge may put ahead of another class's tickets
// queued before them: their turns move later, and the lease must say so
// (Moved: the script publishes it, and a sleeping wait, which goes at
// the turn it was told, asks again), as a wait's ticket does.
func TestClassesLeaseMoves(t *testing.T) {
	c := Config{Interval: 1000, Burst: 1, Sec: 1e6}
	var s State
	s.Init(nil)
	now := 1e12
	s.Apply(now, c, Wait{N: 1, Queue: First, MaxWait: math.Inf(1)}) // the bucket spent
	var tickets []Ticket
	for range 3 {
		r := s.Apply(now, c, Wait{N: 1, Queue: Background, MaxWait: math.Inf(1)})
		tickets = append(tickets, Ticket{Queue: Background, End: r.End})
	}
	before := s.Apply(now, c, Turns{Tickets: tickets}).Turns
	r := s.Apply(now, c, Lease{K: 2, Need: 2, MaxWait: math.Inf(1)})
	if !r.OK || len(r.Turns) != 2 {
		t.Fatalf("lease: %+v", r)
	}
	after := s.Apply(now, c, Turns{Tickets: tickets}).Turns
	later := false
	for i := range tickets {
		later = later || after[i] > before[i]
	}
	if !later {
		t.Fatalf("no background turn moved (before %v, after %v): the test's premise", before, after)
	}
	if !r.Moved {
		t.Errorf("the lease moved background turns later (before %v, after %v) and did not say so", before, after)
	}
	// The last leased turn given back, the queue's tail: the background
	// tickets behind it move up, as a cancel's would (which says so).
	r = s.Apply(now, c, Lease{Back: []int64{r.End}})
	back := s.Apply(now, c, Turns{Tickets: tickets}).Turns
	earlier := false
	for i := range tickets {
		earlier = earlier || back[i] < after[i]
	}
	if !earlier {
		t.Fatalf("no background turn moved (before %v, after %v): the test's premise", after, back)
	}
	if !r.Moved {
		t.Errorf("giving back the tail moved background turns earlier (before %v, after %v) and did not say so", after, back)
	}
}
