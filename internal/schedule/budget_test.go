package schedule

import (
	"math"
	"testing"
)

// TestBudgetRules drives a key's schedule through the hidden budget's
// rules (schedule_budget.go) one response at a time, on times of its own
// (ms): counted cycles, the learned window, its probes and its bounds.
func TestBudgetRules(t *testing.T) {
	const ms = 1e6
	c := Config{Sec: 1e9} // no configured limit: the units go when they are asked
	var s State
	// burst lets n units go at at, one ms apart, as advance counts them.
	burst := func(at float64, n int) float64 {
		for i := range n {
			s.count(at+float64(i)*ms, 1, c.Sec)
		}
		return at + float64(n-1)*ms
	}
	refuse := func(now, sentAt float64) float64 {
		until, _ := s.BudgetRefused(now, sentAt, 1, 1000*ms, c)
		return until
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-3*ms }

	// Units before any refusal are not counted; the first refusal starts
	// the counting, and learns nothing.
	burst(0, 30)
	refuse(30*ms, 29*ms)
	if !s.hb.on || s.hb.n != 0 || s.hb.ended != 0 || s.win.valid {
		t.Fatalf("after the first refusal: %+v, window %v; want counting from 0, no cycle, no window", s.hb, s.win.valid)
	}
	// Jitter against a bucket with no slack: cycles of 500 and 1,300
	// units. No budget.
	burst(1030*ms, 500)
	refuse(1530*ms, 1529*ms)
	burst(2530*ms, 1300)
	refuse(3830*ms, 3829*ms)
	if _, _, _, ok := s.hb.learned(); ok || s.win.valid {
		t.Fatalf("a budget from cycles of 499 and 1,299 units: %+v", s.hb.cycles)
	}
	// Cycles of 22 units, two of them refused: the first refusal ends
	// the cycle (21 counted, its own unit less), the one in flight then
	// takes its unit back.
	last := burst(4830*ms, 22)
	refuse(last+2*ms, last-1*ms)
	refuse(last+3*ms, last)
	if got := s.hb.cycles[1]; got.q != 20 || !near(got.w, 1000*ms+23*ms) {
		t.Fatalf("cycle = %+v; want 20 units, w 1.023s", got)
	}
	last = burst(5855*ms, 22)
	until := refuse(last+2*ms, last-1*ms)
	if !s.win.valid || !s.win.rolls || s.win.size != 20 {
		t.Fatalf("after the second cycle's first refusal (20 and 21 units): window %+v; want a learned one of 20, the fewer", s.win)
	}
	refuse(last+3*ms, last)
	w := s.win
	if w.size != 20 || w.left != 0 || w.reset != until || w.started || !near(w.hi, 1023*ms) {
		t.Fatalf("learned window %+v; want 20 units, spent until the pause's end %v, hi 1.023s", w, until)
	}
	// Its probe at the reset, accepted 2 ms later, starts the next
	// window at once: 19 units left (the probe is one), a step below hi
	// (the cycles put W above 1 ms: far below).
	s.count(until, 1, c.Sec)
	s.win.spend(1, 1, until)
	if !s.BudgetAccepted(until+2*ms, until, c) {
		t.Fatal("an accepted probe moved nothing")
	}
	step := w.hi - w.hi/32
	if w = s.win; w.left != 19 || !near(w.reset, until+step) || !w.started || w.sent0 != until {
		t.Fatalf("after the probe: %+v; want 19 left until %v", w, until+step)
	}
	// A unit sent before the reset is no probe.
	if s.BudgetAccepted(until+10*ms, until+5*ms, c) {
		t.Error("a unit sent before the reset restarted the window")
	}
	// The window spends its 19; its probe at the reset, accepted: hi is
	// its answer less the window's first send.
	burst(until+3*ms, 19)
	s.win.spend(19, 19, until+3*ms)
	probe := s.win.reset
	s.count(probe, 1, c.Sec)
	s.win.spend(1, 1, probe)
	s.BudgetAccepted(probe+2*ms, probe, c)
	hi := probe + 2*ms - until
	if w = s.win; !near(w.hi, hi) || !near(w.reset, probe+(hi-hi/32)) {
		t.Fatalf("after the second probe: hi %v, reset %v; want %v, %v", w.hi, w.reset, hi, probe+(hi-hi/32))
	}
	// Its window spent, the next probe is refused: lo is its send less
	// the window's first answer, the pause ends at that answer + hi
	// (before the refusal's second), and the window is told hi from now
	// on.
	first := s.win.first
	burst(probe+3*ms, 19)
	s.win.spend(19, 19, probe+3*ms)
	probe2 := s.win.reset
	s.count(probe2, 1, c.Sec)
	s.win.spend(1, 1, probe2)
	// The same probe refused with a Retry-After of 3 s, which puts the
	// reset past first + hi even rounded down, is no probe: the server's
	// pause stands, and it ends a cycle.
	long := s
	if got, _ := long.BudgetRefused(probe2+2*ms, probe2, 1, 3000*ms, c); got != probe2+3002*ms || long.win.tight || long.hb.cycles[1].q != 21-1 {
		t.Errorf("a probe refused with Retry-After 3s: pause until %v, tight %v, cycle %+v; want the server's %v, not tight, a cycle of 20", got, long.win.tight, long.hb.cycles[1], probe2+3002*ms)
	}
	if got := refuse(probe2+2*ms, probe2); !near(got, first+hi) {
		t.Fatalf("a refused probe pauses until %v; want %v", got, first+hi)
	}
	if w = s.win; !w.tight || !near(w.lo, probe2-first) || !near(w.reset, first+hi) {
		t.Fatalf("after the refused probe: %+v; want tight, lo %v", w, probe2-first)
	}
	s.count(first+hi, 1, c.Sec)
	s.win.spend(1, 1, first+hi)
	s.BudgetAccepted(first+hi+2*ms, first+hi, c)
	if w = s.win; !near(w.reset, first+hi+w.hi) {
		t.Fatalf("after a refused probe, the window is told %v; want hi %v", w.reset-first-hi, w.hi)
	}
	// A unit of the window's burst refused: the server's arrival jitter,
	// not the budget. The window stays, hi a percent longer; a refusal of
	// a unit in flight then is the same miss; a second miss within two
	// windows ends a cycle.
	start, hi0, ended := s.win.sent0, s.win.hi, s.hb.cycles
	burst(start+3*ms, 19)
	s.win.spend(19, 19, start+3*ms)
	miss := start + 10*ms
	// At the cycles' bound already, a miss leaves the window there.
	capped := s
	_, wmax, _, _ := capped.hb.learned()
	capped.win.hi = wmax
	capped.BudgetRefused(miss, start+5*ms, 1, 1000*ms, c)
	if capped.win.hi != wmax {
		t.Errorf("a miss at the cycles' bound %v: hi %v; want it kept there", wmax, capped.win.hi)
	}
	until, moved := s.BudgetRefused(miss, start+5*ms, 1, 1000*ms, c)
	if moved || !near(s.win.hi, hi0*(1+hiddenTight)) || s.hb.cycles != ended || s.win.miss != miss {
		t.Fatalf("a burst's refusal: moved %v, hi %v (was %v), cycles %+v; want the window kept, hi %v", moved, s.win.hi, hi0, s.hb.cycles, hi0*(1+hiddenTight))
	}
	// Its pause ends when the unit a window before it has left: its send
	// less the window's length, plus hi.
	if want := start + 5*ms - s.win.length + s.win.hi; !near(until, want) || until >= miss+1000*ms {
		t.Errorf("a burst's refusal pauses until %v; want %v, before the Retry-After's %v", until, want, miss+1000*ms)
	}
	s.BudgetRefused(miss+1*ms, start+6*ms, 1, 1000*ms, c)
	if s.hb.cycles != ended || !near(s.win.hi, hi0*(1+hiddenTight)) {
		t.Errorf("a refusal in flight at the miss: cycles %+v, hi %v; want the same miss", s.hb.cycles, s.win.hi)
	}
	s.BudgetRefused(miss+20*ms, miss+15*ms, 1, 1000*ms, c)
	if s.hb.cycles == ended {
		t.Errorf("a second miss within two windows ended no cycle")
	}
	// A window the server states forgets the budget.
	s.Window(first+hi+3*ms, 5, 1000*ms, 10, 0, c)
	if s.hb.on || s.win.rolls {
		t.Errorf("a stated window: budget %+v, learned %v; want none", s.hb, s.win.rolls)
	}
	// A budget is forgotten hiddenKeep after the last refusal.
	var k State
	k.hb = budget{on: true, at: 0}
	k.hb.counted(hiddenKeep*c.Sec+1, 1, c.Sec)
	if k.hb.on {
		t.Errorf("a budget counted %vs after its last refusal", hiddenKeep)
	}
}
