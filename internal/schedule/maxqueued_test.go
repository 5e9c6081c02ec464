package schedule

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestMaxQueued: random waits (of 1 or 2 units, either queue, some with
// a max wait), cancels, pauses and bare rejections on keys with and
// without further limits, every wait bounded by the key's MaxQueued: the
// units queued are never more than the bound after any op; a wait
// refused for it (Reply.Full) leaves the state the advance to its now
// leaves (but for the further limits' walk's floor, x.floor, which the
// enqueue moves to now, as for a wait refused past its max wait), and
// only a wait that would have queued is refused.
func TestMaxQueued(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	full, queued := 0, 0
	for seq := range 300 {
		c := Config{Interval: float64(1 + r.IntN(3000)), Burst: float64(1 + r.IntN(4)), Sec: 1e6}
		var lims []Limit
		if seq%3 == 0 {
			lims = []Limit{BucketLimit(float64(500+r.IntN(3000)), float64(1+r.IntN(3))), WindowLimit(KindLog, 1e6, float64(2+r.IntN(5)), 0)}
		}
		m := int64(2 + r.IntN(6))
		var s State
		s.Init(lims)
		type held struct {
			qi   int
			e, n int64
		}
		var tickets []held
		now := 1.7e15
		for op := range 80 {
			now += float64(r.IntN(3000))
			switch k := r.IntN(14); {
			case k == 0:
				s.Apply(now, c, Pause{D: float64(r.IntN(5000))})
			case k == 1:
				s.Apply(now, c, Adapt{Cost: 1, Rejected: true})
			case k < 4 && len(tickets) > 0:
				i := r.IntN(len(tickets))
				h := tickets[i]
				tickets = slices.Delete(tickets, i, i+1)
				s.Apply(now, c, Cancel{Ticket: Ticket{Queue: h.qi, End: h.e}, N: h.n})
			default:
				var cost []float64
				if lims != nil {
					cost = []float64{float64(r.IntN(2)), float64(r.IntN(2))}
				}
				w := Wait{N: int64(1 + r.IntN(2)), Queue: r.IntN(2), MaxWait: math.Inf(1), MaxQueued: m, Cost: cost}
				if r.IntN(4) == 0 {
					w.MaxWait = float64(1 + r.IntN(20000))
				}
				// The state the advance alone leaves: a give-back of a
				// lost ticket is an advance and the write-back's tidying.
				adv := s.clone()
				adv.Apply(now, c, Cancel{Lost: true})
				maxCost := s.maxCost
				rep := s.Apply(now, c, w)
				switch {
				case rep.Full:
					full++
					if rep.OK || rep.Turn <= now {
						t.Fatalf("seq %d op %d: %+v refused as full: %+v", seq, op, w, rep)
					}
					if float64(w.N) <= maxCost && !slices.Equal(noFloor(s.Fields()), noFloor(adv.Fields())) {
						t.Fatalf("seq %d op %d: a wait refused as full changed the state:\nadvance %v\nrefused %v", seq, op, adv.Fields(), s.Fields())
					}
				case rep.OK && !s.Gone(w.Queue, rep.End):
					queued++
					tickets = append(tickets, held{w.Queue, rep.End, w.N})
				}
			}
			if q := s.Queued(); q > m {
				t.Fatalf("seq %d op %d: %d units queued; MaxQueued %d", seq, op, q, m)
			}
		}
	}
	t.Logf("%d waits queued, %d refused as full", queued, full)
	if full < 100 || queued < 100 {
		t.Errorf("%d waits queued, %d refused as full: want both well covered", queued, full)
	}
}

// noFloor returns fs without the further limits' walk's floor.
func noFloor(fs []Field) []Field {
	return slices.DeleteFunc(fs, func(f Field) bool { return f.Name == "x.floor" })
}
