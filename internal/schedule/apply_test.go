package schedule

import (
	"math"
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
