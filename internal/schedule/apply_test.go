package schedule

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestApplyWaits: waits on a key of 1 ms a unit, burst 2, at one instant
// of the epoch in µs: two go at once, the third's turn is a unit later,
// and one past its max wait is refused with nothing kept.
func TestApplyWaits(t *testing.T) {
	c := Config{Interval: 1000, Burst: 2, Sec: 1e6}
	now := 1.7e15
	var s State
	s.Init(nil)
	for i, want := range []float64{0, 0, 1000} {
		r := s.Apply(now, c, Wait{N: 1, Queue: First, MaxWait: math.Inf(1)})
		if !r.OK || WaitOf(now, r.Turn) != want || r.End != int64(i+1) {
			t.Fatalf("wait %d: OK %v, wait %v, end %d; want true, %v, %d", i, r.OK, WaitOf(now, r.Turn), r.End, want, i+1)
		}
	}
	before := s.Fields()
	r := s.Apply(now, c, Wait{N: 1, Queue: First, MaxWait: 2000})
	if r.OK || r.Turn != now+2000 {
		t.Fatalf("wait past its max wait: OK %v, turn %v; want false, %v", r.OK, r.Turn, now+2000)
	}
	if after := s.Fields(); !slices.Equal(before, after) {
		t.Errorf("a refused wait changed the state:\n%v\n%v", before, after)
	}
	if got := WaitOf(now, r.Turn); got != 2000 {
		t.Errorf("WaitOf = %v; want 2000", got)
	}
}

// TestApplyStateViewReadOnly: the state op reads, after an advance of its
// own, and changes nothing, further limits included.
func TestApplyStateViewReadOnly(t *testing.T) {
	c := Config{Interval: 1000, Burst: 1, Sec: 1e6}
	now := 1.7e15
	var s State
	s.Init([]Limit{BucketLimit(5000, 2), WindowLimit(KindLog, 1e6, 3, 0)})
	for range 4 {
		s.Apply(now, c, Wait{N: 1, Queue: First, MaxWait: math.Inf(1), Cost: []float64{1, 1}})
	}
	before := s.Fields()
	r := s.Apply(now+1e6, c, StateView{})
	if r.View.Queued != 0 {
		t.Errorf("view a second later: %v queued; want 0 (their turns came)", r.View.Queued)
	}
	s.Apply(now+1e6, c, StateView{Limits: true})
	if after := s.Fields(); !slices.Equal(before, after) {
		t.Errorf("the state op changed the state:\n%v\n%v", before, after)
	}
}

// TestApplyLeaseTurns: a lease's turns in a row are the turns of waits in
// a row, and the ones past the max wait are not taken. (Exact here; with
// a fractional interval the lease's closed form, from its first turn,
// and the waits', each from the tat the last one left, may round apart
// by an ulp.)
func TestApplyLeaseTurns(t *testing.T) {
	c := Config{Interval: 250000, Burst: 1, Sec: 1e6}
	now := 1.7e15 + 0.25
	var a, b State
	a.Init(nil)
	b.Init(nil)
	r := a.Apply(now, c, Lease{K: 5, Need: 5, MaxWait: 1e6})
	var turns []float64
	for range 5 {
		w := b.Apply(now, c, Wait{N: 1, Queue: First, MaxWait: 1e6})
		if !w.OK {
			break
		}
		turns = append(turns, w.Turn)
	}
	if !slices.Equal(r.Turns, turns) || !slices.Equal(a.Fields(), b.Fields()) {
		t.Errorf("lease turns %v, waits' %v; states equal: %v", r.Turns, turns, slices.Equal(a.Fields(), b.Fields()))
	}
	if len(turns) != 4 {
		t.Errorf("%d turns within 1 s at 4/s; want 4", len(turns))
	}
}

// TestWaitNowIsApply: WaitNow, the Limiter's shortcut for a wait that
// goes at once, leaves the state Apply's Wait leaves and goes only where
// Apply's reply says the wait went at once; where it does not go, Apply
// on the state it left gives Apply's reply. Random waits, pauses,
// cancels and bare rejections on keys with and without further limits.
func TestWaitNowIsApply(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	shortcut, waits := 0, 0
	defer func() {
		if !t.Failed() && (shortcut < waits/10 || shortcut == waits) {
			t.Errorf("WaitNow went for %d of %d waits; want both paths well covered", shortcut, waits)
		}
	}()
	for seq := range 300 {
		c := Config{Interval: float64(1 + r.IntN(3000)), Burst: float64(1 + r.IntN(4)), Sec: 1e6}
		var lims []Limit
		if seq%3 == 0 {
			lims = []Limit{BucketLimit(float64(500+r.IntN(3000)), float64(1+r.IntN(3))), WindowLimit(KindLog, 1e6, float64(2+r.IntN(5)), 0)}
		}
		var a, b State
		a.Init(lims)
		b.Init(slices.Clone(lims)) // the state owns its limits
		now := 1.7e15
		for op := range 60 {
			now += float64(r.IntN(8000))
			var cost []float64
			if lims != nil {
				cost = []float64{float64(r.IntN(2)), float64(r.IntN(2))}
			}
			n := int64(1 + r.IntN(2))
			switch r.IntN(12) {
			case 0:
				p := Pause{D: float64(r.IntN(5000))}
				a.Apply(now, c, p)
				b.Apply(now, c, p)
				continue
			case 1:
				a.Apply(now, c, Adapt{Cost: 1, Rejected: true})
				b.Apply(now, c, Adapt{Cost: 1, Rejected: true})
				continue
			}
			w := Wait{N: n, Queue: r.IntN(2), MaxWait: math.Inf(1), Cost: cost}
			ra := a.Apply(now, c, w)
			e, moved, ok := b.WaitNow(now, c, w.Queue, w.N, w.Cost)
			waits++
			wentNow := ra.OK && ra.Turn == now && a.Gone(w.Queue, ra.End)
			if ok && !wentNow {
				t.Fatalf("seq %d op %d: WaitNow went; Apply's reply %+v (gone %v)", seq, op, ra, wentNow)
			}
			if ok {
				shortcut++
				if e != ra.End || moved != ra.Moved {
					t.Fatalf("seq %d op %d: WaitNow end %d moved %v; Apply end %d moved %v", seq, op, e, moved, ra.End, ra.Moved)
				}
			} else {
				rb := b.Apply(now, c, w)
				if rb.OK != ra.OK || rb.Turn != ra.Turn || rb.End != ra.End {
					t.Fatalf("seq %d op %d: after WaitNow, Apply replies %+v; Apply alone %+v", seq, op, rb, ra)
				}
			}
			// The state as the script keeps it (the differential suite's).
			if fa, fb := a.Fields(), b.Fields(); !slices.Equal(fa, fb) {
				t.Fatalf("seq %d op %d (%+v, WaitNow went %v): states differ:\nApply   %v\nWaitNow %v", seq, op, w, ok, fa, fb)
			}
		}
	}
}
