package schedule

import "math"

// What an op decided: read by comparing a key's state before and after
// it (a waiter reports these as events: a slow-down, a declared pace, a
// window learned, a shift, a cut's end).

// Watch is what a decision is read against: the key's state before an op
// changed it.
type Watch struct {
	queued int64
	last   float64 // the turn of the last queued unit; -Inf if none queued
	next   float64 // the turn of a wait arriving now
	cut    cut
	win    window
	dInt   float64
	dBurst float64
	trim   float64
}

// Watch returns the state at now that decisions are read against; the
// turn of a wait arriving now only if rejected (a lone rejection may move
// it), else -Inf. It requires Advance at now.
func (s *State) Watch(now float64, c Config, rejected bool) Watch {
	w := Watch{queued: s.Queued(), last: math.Inf(-1), next: math.Inf(-1), cut: s.cut, win: s.win, dInt: s.dInt, dBurst: s.dBurst, trim: s.trim}
	if w.queued > 0 {
		w.last = s.TurnAt(now, c, float64(w.queued))
	} else if rejected {
		w.next = s.TurnAt(now, c, 1)
	}
	return w
}

// Decisions are what an op decided, in schedule units; zero values are
// decisions not taken.
type Decisions struct {
	// Cut: a cut started, at CutRate units a second; it ends at CutEnd.
	Cut     bool
	CutRate float64
	CutEnd  float64
	// Trimmed: a rejection trimmed a known limit's pace, to TrimRate
	// units a second.
	Trimmed  bool
	TrimRate float64
	// Declared: a server's declared pace was adopted or changed.
	Declared      bool
	DeclaredRate  float64
	DeclaredBurst float64
	// Window: a new window was learned, with WindowLeft units until
	// WindowReset.
	Window      bool
	WindowLeft  float64
	WindowReset float64
	// Shift: how far the queued turns (or the next turn, for a lone
	// rejection) moved later.
	Shift float64
}

// Decide returns what changed since w, at now: a slow-down (a cut
// started, or the pace trimmed), a declared pace adopted or changed, a
// new window learned, and how far the queued turns moved later.
func (s *State) Decide(now float64, c Config, w Watch) Decisions {
	var d Decisions
	if s.cut.r0 != 0 && s.cut.at == now && s.cut != w.cut {
		d.Cut, d.CutRate, d.CutEnd = true, s.cut.r0, s.cut.end(c.Sec)
	}
	if s.trim > w.trim {
		if iv, _ := s.Base(c); iv > 0 {
			d.Trimmed, d.TrimRate = true, c.Sec/iv
		}
	}
	if s.dInt > 0 && (s.dInt != w.dInt || s.dBurst != w.dBurst) {
		d.Declared, d.DeclaredRate, d.DeclaredBurst = true, c.Sec/s.dInt, max(s.dBurst, 1)
	}
	// A new window: none before, or one past its reset (probing), or a
	// later reset (window.update's cases that replace it).
	if win := &s.win; win.valid && *win != w.win && (!w.win.valid || w.win.probed > 0 || win.reset > w.win.reset) {
		d.Window, d.WindowLeft, d.WindowReset = true, win.left, win.reset
	}
	// A lone rejection under a known limit shifts the schedule without
	// cutting its pace: the cut's time of last change moved, and nothing
	// else of it.
	lone := s.cut.moved && s.cut.last == now && s.cut.at == w.cut.at && s.cut.r0 == w.cut.r0 &&
		!(w.cut.moved && w.cut.last == now)
	switch {
	case w.queued > 0:
		d.Shift = s.TurnAt(now, c, float64(w.queued)) - w.last
	case lone && w.next > math.Inf(-1):
		// From when a wait arriving now would have gone: now, if the
		// bucket had room.
		d.Shift = s.TurnAt(now, c, 1) - max(w.next, now)
	}
	return d
}

// CutEnds reports whether the cut that started at at is over at now,
// and if not, when it ends; ok is false if a later cut replaced it (that
// cut ends on its own).
func (s *State) CutEnds(now float64, c Config, at float64) (over bool, end float64, ok bool) {
	if s.cut.at != at {
		return false, 0, false
	}
	if s.cut.rate(now, c.Sec) > 0 { // not yet, rounding aside
		return false, s.cut.end(c.Sec), true
	}
	return true, now, true
}

// end returns when the cut is over: its pace back to the rate it was cut
// from (with a limit), or past its probing (without one). It walks the
// cut's steps (at most 4·maxSteps; a cut is over in a few dozen).
func (c *cut) end(sec float64) float64 {
	t := c.at
	for range 4 * maxSteps {
		n := c.nextStep(t, sec)
		if math.IsInf(n, 1) {
			break
		}
		t = n
	}
	return t
}
