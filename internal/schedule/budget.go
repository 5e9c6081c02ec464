package schedule

import "math"

// A hidden budget: a server that grants less than the key's limit (a
// limit told too high, or a budget other clients spend too) and says
// nothing of it but Retry-After on its refusals. Paced at the configured
// limit, each cycle bursts until the budget is spent, takes a 429, and
// pauses: a rolling budget of 20 a second met at 100/s took a refusal per
// 20 successes (0.05 429s per success), one process or a fleet of four.
//
// Such a cycle tells the budget, and the key's state learns it where the
// units go, so that a fleet sharing the state learns the fleet's budget,
// not one process's share. The units that went from the first unit of a
// cycle (at s) to the refusal that ended it (at r, with Retry-After a)
// are q, the most the budget took at once, less the refused ones (every
// refusal of a unit sent before the cycle ended takes one back); and the
// server had room again by r + a, so its units come back no later than
// w = r + a − s after they went. Whole-second Retry-After values round
// the second figure up, never down, so w bounds the budget's window from
// above: a window of q units per w, restarted by the first unit accepted
// past the last one's end, never asks for more than the budget gave.
// The bound is as tight as the burst is short: Retry-After counts from
// the burst's first unit, so a burst the key's own pace spreads over d
// reads w up to d long (20 units at a configured 100/s, burst 10: 1.11 s
// for a budget's second).
//
// The learned window is the key's window (schedule_window.go) with
// rolls set: q units until its reset, then a probe (the window's
// probes), whose acceptance starts the next window at once, its reset
// counted from the probe's send (the units queued behind it move up). A
// probe accepted after a window that spent the budget shows its first
// unit had left: W ≤ the probe's answer − the window's first send (hi);
// refused, that it had not: W > the probe's send − the window's first
// answer (lo). A cycle's refusal gives a lo too: a Retry-After a,
// rounded to a whole second, puts the server's reset after r + a − 1 s.
// While hi − lo is wider than hiddenTight of hi and no probe was refused,
// each window is told shorter than hi: a step of hiddenStep of hi down,
// or the middle of the interval, whichever is later. A refused probe
// costs its 429 but no time: its Retry-After says the reset is within a
// whole second, hi that it is by the window's first answer + hi, earlier,
// so the key's pause ends there (the refused request's own retry still
// waits its Retry-After); and the windows are told hi from then on: a
// probe proves its own arrival late enough, not the burst that follows
// it, and on the real clock probes within a percent of the budget's
// window let bursts through that the server then refused (a fleet of
// four, 1.10–1.38× the budget's time where stopping at the first refused
// probe took 1.04–1.05×). A refusal of a unit of a window's burst is the
// server's arrival jitter, not the budget, the first time in two windows
// (a miss): the windows grow a step of hiddenTight (no longer than the
// cycles read them), and the pause ends a
// window after the unit it follows (four processes: nine runs of 9 at
// 1.04–1.05×, where a miss ended a cycle and cost 1.11–1.16×). A refusal
// of any other unit (sent before the window's reset, or at or after
// first + hi), or one whose Retry-After
// puts the reset after first + hi even rounded (a − 1 s from it),
// contradicts the bounds: it ends a cycle as any refusal does, and the
// two last cycles decide again. The rolling budget above, one process:
// 400 units in 19.9 s, 1.05× the budget's 19 s, one probe refused.
//
// A fleet learns it once for all: its processes' refusals and units go
// through the one state, and a process tells the state the acceptance of
// a unit it sent past a learned window's reset (the waits' replies carry
// the reset; see the distributed package).
//
// The window, not a pace: a budget counted over a rolling window admits
// its q units at once every w, which a pace of q/w with a bucket deep
// enough to burst overruns (q at once, and one more q/w later, in less
// than w), and a pace one unit deep spends a second more than the budget
// needs over a run of 400 units at 20 a second.
//
// A key counts cycles from its first refusal with a Retry-After (so a
// key that is never refused keeps nothing), and three refusals learn a
// budget. Two cycles must agree (their q within hiddenAgree, or one unit;
// their w within hiddenAgree) before the window is used: a lone refusal,
// or refusals that timer jitter draws from a server bucket with no slack
// (a refusal after 500 units, the next after 1,300), is no budget. The
// budget is forgotten hiddenKeep after the last refusal (a budget that
// grew is then found again, at the cost of two refusals' cycles), and
// when a response states a window of its own (the rules for stated
// windows apply). Not for a key with further limits ([Limiter.Limits]):
// its user stated what the server counts in several units, and a refusal
// for one of them (a completion's tokens charged past the estimate while
// a request was on its way) read as a budget in requests slowed an LLM
// client by a fifth.

// cycle is one burst of a key's that a refusal ended: q units, the
// window's upper bound w, and lo, a lower bound (see above).
type cycle struct{ q, w, lo float64 }

// budget is what a key's refusals told of a hidden budget.
type budget struct {
	on     bool     // a refusal with a Retry-After came within hiddenKeep
	at     float64  // when the last one came
	n      float64  // units gone in the open cycle
	first  float64  // when its first unit went (valid while n > 0)
	end    float64  // when the last cycle ended: a refusal of a unit sent before it is that cycle's
	cycles [2]cycle // the last two cycles a refusal ended, newest last
	ended  int      // how many of cycles are set
}

// learned returns the window of q units per w that the last two cycles
// agree on, and the larger of their lower bounds.
func (b *budget) learned() (q, w, lo float64, ok bool) {
	if b.ended < 2 {
		return 0, 0, 0, false
	}
	c0, c1 := b.cycles[0], b.cycles[1]
	q, w = min(c0.q, c1.q), min(c0.w, c1.w)
	if q < 1 || w <= 0 || math.Abs(c0.q-c1.q) > max(1, hiddenAgree*max(c0.q, c1.q)) || math.Abs(c0.w-c1.w) > hiddenAgree*max(c0.w, c1.w) {
		return 0, 0, 0, false
	}
	return q, w, min(max(c0.lo, c1.lo), w), true
}

// target returns the length a window is told, from the interval (lo, hi]
// its budget's window is in: hi once the interval is within hiddenTight
// of it, else a step below it (see above).
func target(lo, hi float64) float64 {
	if hi-lo <= hiddenTight*hi {
		return hi
	}
	return max(hi-hiddenStep*hi, lo+(hi-lo)/2)
}

// counted counts k units gone at now in the key's open cycle.
func (b *budget) counted(now, k, sec float64) {
	if !b.on {
		return
	}
	if now-b.at > hiddenKeep*sec {
		*b = budget{}
		return
	}
	if b.n == 0 {
		b.first = now
	}
	b.n += k
}

// BudgetRefused applies, after advance, a refusal at now of cost units
// sent at sentAt that said to come back after pause (a 429 with
// Retry-After), and returns when the key's pause is to end: now + pause,
// or earlier for a learned window's refused probe or miss (see above). It
// reports whether the window changed.
func (s *State) BudgetRefused(now, sentAt, cost, pause float64, c Config) (until float64, moved bool) {
	until = now + pause
	b, w := &s.hb, &s.win
	if s.x != nil || (w.valid && !w.rolls) {
		return until, false // further limits, or a window the server states
	}
	if !b.on || now-b.at > hiddenKeep*c.Sec {
		// The first cycle is the one after the first refusal.
		*b = budget{on: true, at: now, end: now}
		return until, s.forget()
	}
	b.at = now
	if sentAt < b.end {
		// A unit in flight when its cycle ended: one the cycle took back.
		if b.ended == 0 || b.cycles[1].q < cost {
			return until, false
		}
		b.cycles[1].q -= cost
		return until, s.install(until, false)
	}
	if w.rolls && w.started && w.probed > 0 && w.length < w.hi && sentAt >= w.probeAt && sentAt < w.first+w.hi && until-c.Sec < w.first+w.hi {
		// A probe refused: the window's first unit had not left.
		w.lo = max(w.lo, sentAt-w.first)
		w.length, w.tight = w.hi, true
		w.reset, w.probeAt, w.probed, w.past = w.first+w.hi, w.first+w.hi, 0, 0
		return w.reset, true
	}
	if w.rolls && w.started && sentAt >= w.sent0 && sentAt < w.reset {
		switch {
		case w.miss > 0 && sentAt < w.miss:
			return until, false // in flight at the last miss: the same one
		case w.miss == 0 || now-w.miss > 2*w.length:
			// A unit of the window's burst refused, the first in two
			// windows: the server's arrival jitter made its gap from
			// the unit it follows a window later short (a probe proves
			// its own arrival, not the burst's). The budget stands; the
			// windows are a step of hiddenTight longer from now on, and
			// the pause ends when the unit it follows, sent a window's
			// length before it, has surely left (by hi after it, within
			// the refusal's whole-second Retry-After). A second within
			// two windows is a budget that changed: it ends a cycle as
			// any refusal does, and the server's pause stands.
			w.miss, w.hi, w.tight = now, w.hi+hiddenTight*w.hi, true
			if _, wmax, _, ok := b.learned(); ok {
				w.hi = min(w.hi, wmax) // no longer than the cycles read it
			}
			return min(until, max(now, sentAt-w.length+w.hi)), false
		}
	}
	if b.n > 0 {
		b.cycles[0], b.cycles[1] = b.cycles[1], cycle{q: max(b.n-cost, 0), w: until - b.first, lo: max(sentAt+pause-c.Sec-b.first, 0)}
		b.ended = min(b.ended+1, 2)
	}
	b.n, b.end = 0, now
	return until, s.install(until, true)
}

// install makes the budget the last two cycles agree on the key's
// window, spent until until (ended: a refusal ended a cycle), or keeps
// the learned window in use at most that budget (a refusal of a unit in
// flight when its cycle ended); it drops a learned window when they do
// not agree. It reports whether the window changed.
func (s *State) install(until float64, ended bool) bool {
	w := &s.win
	q, hi, lo, ok := s.hb.learned()
	switch {
	case !ok:
		return s.forget()
	case w.rolls && !w.started && w.hi == hi && w.lo == lo && w.size == q:
		return false
	case w.rolls && w.started && !ended:
		// A window in use: a refusal in flight when its cycle ended
		// takes its unit back from the size.
		if w.size <= q {
			return false
		}
		w.size, w.left = q, min(w.left, q)
		return true
	}
	// The window is spent (a refusal ended it) until the pause's end,
	// then probes: an accepted one starts the next window.
	*w = window{valid: true, rolls: true, reset: until, probeAt: until, size: q, length: hi, lo: lo, hi: hi}
	return true
}

// forget drops a learned window; it reports whether there was one.
func (s *State) forget() bool {
	if !s.win.rolls {
		return false
	}
	s.win = window{}
	return true
}

// BudgetAccepted applies, after advance, the acceptance at now of a unit
// sent at sentAt: a unit of a learned window sent at or past its reset (a
// probe) starts the next window (see above). It reports whether the
// window changed (queued turns move earlier).
func (s *State) BudgetAccepted(now, sentAt float64, c Config) bool {
	w, b := &s.win, &s.hb
	if !w.valid || !w.rolls || sentAt < w.reset {
		return false
	}
	if now-b.at > hiddenKeep*c.Sec {
		*b = budget{}
		return s.forget() // the budget is forgotten: the key's own limits
	}
	if w.started && w.left == 0 {
		// The window spent the budget, and a unit sent past its end was
		// accepted: the window's first unit had left.
		w.hi = min(w.hi, now-w.sent0)
		if w.lo >= w.hi {
			w.lo = 0 // bounds that contradict each other: the probes' are dropped
		}
	}
	length := target(w.lo, w.hi)
	if w.tight {
		length = w.hi
	}
	left := max(w.size-w.past, 0)
	b.n, b.first = w.past, sentAt
	*w = window{valid: true, rolls: true, left: left, reset: sentAt + length, probeAt: sentAt + length, size: w.size, told: left,
		length: length, lo: w.lo, hi: w.hi, sent0: sentAt, first: now, started: true, tight: w.tight, miss: w.miss}
	return true
}
