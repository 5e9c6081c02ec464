package strict

import (
	"math"
	"testing"

	"github.com/throttle-go/throttle/internal/schedule"
)

// burstAt lets a burst of n
// units go at at, on a key paced by c: its busy period starts at
// at.
func burstAt(s *schedule.State, c schedule.Config, at float64, n int64) {
	s.Advance(at, c)
	if _, ok := s.GoNow(at, c, schedule.First, n, nil); !ok {
		panic("the burst did not go")
	}
}

// TestBurstSpread checks the rule on one key: the responses to the busy
// period's first burst move its turns by the spread of their round trips
// (as it grows, by what it grew), at most AnchorMax of an interval; a
// later unit's response moves nothing, nor does a key without a
// configured limit.
func TestBurstSpread(t *testing.T) {
	const ms = 1e6
	c := schedule.Config{Interval: 10 * ms, Burst: 10, Sec: 1e9}
	var s schedule.State
	s.Init(nil)
	burstAt(&s, c, 0, 10) // tat 100 ms, busy since 0
	var k Key
	steps := []struct {
		now, sentAt, rtt float64
		moved            bool
		tat              float64
	}{
		{2 * ms, 0, 2 * ms, false, 100 * ms},
		{2.3 * ms, 0, 2.3 * ms, true, 100.3 * ms},
		{2.2 * ms, 0, 2.2 * ms, false, 100.3 * ms},
		{2.9 * ms, 0, 2.9 * ms, true, 100.9 * ms},
		{5 * ms, 0, 5 * ms, true, 101 * ms},            // capped: 0.1 of 10 ms
		{14 * ms, 10 * ms, 2 * ms, false, 101 * ms},    // not of the burst
		{14 * ms, 9.9 * ms, 4.1 * ms, false, 101 * ms}, // of the burst's interval; the cap holds
	}
	for i, st := range steps {
		moved := k.spread(&s, st.now, c, st.sentAt, st.rtt)
		if moved != st.moved || math.Abs(s.Tat()-st.tat) > 1e-6 {
			t.Errorf("step %d: moved %v, tat %.3f ms; want %v, %.3f ms", i, moved, s.Tat()/ms, st.moved, st.tat/ms)
		}
	}
	// A new busy period starts over.
	burstAt(&s, c, 2000*ms, 10) // tat 2100 ms
	k.spread(&s, 2002*ms, c, 2000*ms, 2*ms)
	if !k.spread(&s, 2003*ms, c, 2000*ms, 2.5*ms) || math.Abs(s.Tat()-2100.5*ms) > 1e-6 {
		t.Errorf("new busy period: tat %.3f ms; want 2100.5 ms", s.Tat()/ms)
	}
	// No configured limit (a declared pace): nothing.
	var d schedule.State
	d.Init(nil)
	dc := schedule.Config{Sec: 1e9}
	d.Declare(0, dc, 10*ms, 10)
	burstAt(&d, dc, 0, 10)
	var dk Key
	dk.spread(&d, 2*ms, dc, 0, 2*ms)
	if dk.spread(&d, 3*ms, dc, 0, 3*ms) {
		t.Errorf("a declared pace moved")
	}
}
