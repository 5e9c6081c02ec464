package throttle

import (
	"math"
	"time"
)

// The events of a Limiter's own decisions: what Adapt and Pause changed in
// a key's schedule, read by comparing the schedule before and after the
// call, and reported once the key's lock is released; and a cut's end,
// reported by a timer armed when the cut starts (only when someone
// listens).

// watch is what a decision is read against: the key's schedule before a
// call changed it.
type watch struct {
	queued int64
	last   float64 // the turn of the last queued unit; -Inf if none queued
	next   float64 // the turn of a wait arriving now
	cut    cut
	win    window
	dInt   float64
	dBurst float64
	trim   float64
}

// decided holds the events of one call, to emit after the lock; nil (no
// allocation) when the call decided nothing.
type decided []Event

func (d *decided) add(e Event) {
	*d = append(*d, e)
}

// emit reports the events to the Limiter's OnEvent and to the call's
// sink. It must be called without b.mu.
func (d decided) emit(onEvent func(Event), sink *eventSink) {
	for _, e := range d {
		if sink != nil {
			e = sink.fill(e)
		}
		if onEvent != nil {
			onEvent(e)
		}
		if sink != nil {
			sink.fn(e)
		}
	}
}

// watchLocked returns the schedule's state at now that decisions are read
// against; the turn of a wait arriving now only if rejected (a lone
// rejection may move it), else -Inf. It requires b.mu, after advance.
func (b *bucket) watchLocked(now float64, rejected bool) watch {
	s := &b.s
	w := watch{queued: s.queued(), last: math.Inf(-1), next: math.Inf(-1), cut: s.cut, win: s.win, dInt: s.dInt, dBurst: s.dBurst, trim: s.trim}
	if w.queued > 0 {
		w.last = s.turnAt(now, b.pacing, float64(w.queued))
	} else if rejected {
		w.next = s.turnAt(now, b.pacing, 1)
	}
	return w
}

// decideLocked returns the events of what changed since w, at now: a
// slow-down (a cut started), a declared pace adopted or changed, a new
// window learned, and a shift (the queued turns moved later by a
// millisecond or more, or a lone rejection moved the next turn). It arms
// the recovery timer of a cut that started. It requires b.mu.
func (b *bucket) decideLocked(now float64, w watch, sink *eventSink) decided {
	var d decided
	s := &b.s
	sec := b.pacing.sec
	if s.cut.r0 != 0 && s.cut.at == now && s.cut != w.cut {
		d.add(Event{Kind: EventSlowDown, Key: b.key, Rate: s.cut.r0})
		b.armRecoveryLocked(now)
	}
	if s.trim > w.trim {
		// A rejection trimmed the known limit's pace (see trimStep).
		if iv, _ := s.base(b.pacing); iv > 0 {
			d.add(Event{Kind: EventSlowDown, Key: b.key, Rate: sec / iv})
		}
	}
	if b.recovery != nil && sink != nil {
		b.recoverTo = sink.fn // the last Transport that adapted the key
	}
	if s.dInt > 0 && (s.dInt != w.dInt || s.dBurst != w.dBurst) {
		d.add(Event{Kind: EventDeclared, Key: b.key, Rate: sec / s.dInt, Burst: int(max(s.dBurst, 1))})
	}
	// A new window: none before, or one past its reset (probing), or a
	// later reset (window.update's cases that replace it).
	if win := &s.win; win.valid && *win != w.win && (!w.win.valid || w.win.probed > 0 || win.reset > w.win.reset) {
		d.add(Event{Kind: EventWindow, Key: b.key, Remaining: win.left, Delay: duration(win.reset - now)})
	}
	// A lone rejection under a known limit shifts the schedule without
	// cutting its pace: the cut's time of last change moved, and nothing
	// else of it.
	lone := s.cut.moved && s.cut.last == now && s.cut.at == w.cut.at && s.cut.r0 == w.cut.r0 &&
		!(w.cut.moved && w.cut.last == now)
	var moved float64
	switch {
	case w.queued > 0:
		moved = s.turnAt(now, b.pacing, float64(w.queued)) - w.last
	case lone && w.next > math.Inf(-1):
		// From when a wait arriving now would have gone: now, if the
		// bucket had room.
		moved = s.turnAt(now, b.pacing, 1) - max(w.next, now)
	}
	if delay := duration(moved); delay >= minReportedWait {
		d.add(Event{Kind: EventShift, Key: b.key, Delay: delay})
	}
	return d
}

// listening reports whether anyone listens to the key's decisions: the
// call's sink or the Limiter's OnEvent.
func (b *bucket) listening(sink *eventSink) bool {
	return sink != nil || b.l.OnEvent != nil
}

// armRecoveryLocked arms the timer that reports the end of the cut that
// started at now. It requires b.mu.
func (b *bucket) armRecoveryLocked(now float64) {
	end := b.s.cut.end(b.pacing.sec)
	if b.recovery != nil {
		b.recovery.Stop()
	}
	b.recoverTo = nil
	at := b.s.cut.at
	b.recovery = time.AfterFunc(duration(end-now), func() { b.recovered(at) })
}

// recovered reports that the cut that started at at has ended, unless a
// later cut replaced it (its own timer reports that one).
func (b *bucket) recovered(at float64) {
	b.mu.Lock()
	now := b.l.now()
	c := &b.s.cut
	if c.at != at {
		b.mu.Unlock()
		return
	}
	if c.rate(now, b.pacing.sec) > 0 { // not yet, rounding aside
		b.recovery.Reset(duration(c.end(b.pacing.sec) - now))
		b.mu.Unlock()
		return
	}
	to := b.recoverTo
	b.recovery, b.recoverTo = nil, nil
	interval, _ := b.s.base(b.pacing)
	b.mu.Unlock()
	e := Event{Kind: EventRecovered, Key: b.key}
	if interval > 0 {
		e.Rate = b.pacing.sec / interval
	}
	if b.l.OnEvent != nil {
		b.l.OnEvent(e)
	}
	if to != nil {
		to(e)
	}
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
