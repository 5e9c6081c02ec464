package throttle

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// A hidden budget: a server that grants less than the key's limit (a
// limit told too high, or a budget other clients spend too) and says
// nothing of it but Retry-After on its refusals. Paced at the configured
// limit, each cycle bursts until the budget is spent, takes a 429, and
// pauses: a rolling budget of 20 a second met at 100/s took a refusal per
// 20 successes (0.05 429s per success).
//
// Such a cycle tells the budget. The units accepted from the first
// acceptance of a cycle (sent at s) to the refusal that ended it (at r,
// with Retry-After a) are q, the most the budget took at once; and the
// server had room again by r + a, so its units come back no later than
// w = r + a − s after they went. Whole-second Retry-After values round
// the second figure up, never down, so w bounds the budget's window from
// above: a window of q units per w, restarted by the first acceptance
// after the last one ended, never asks for more than the budget gave.
// The bound is as tight as the burst is short: Retry-After counts from
// the burst's first unit, so a burst the key's own pace spreads over d
// reads w up to d long (20 units at a configured 100/s, burst 10: 1.11 s
// for a budget's second; told nothing, 1.0 s). It
// is told to the key's waiter as a server's window is ([Feedback]'s
// window: Remaining q − units accepted in the cycle until Reset), and
// the waiter spends it as one: at once while units are left, then a probe
// at the reset, whose acceptance starts the next cycle.
//
// Each response bounds the true window W to an interval, and the bounds
// are intersected. A refusal's Retry-After a, rounded to a whole second,
// puts the server's reset after r + a − 1 s: W > its send + a − 1 s −
// the cycle's first answer (lo). A probe (the first unit past a cycle's
// reset) accepted after a cycle that spent q units shows the cycle's
// first unit had left: W ≤ its answer − s (hi); refused, that it had
// not: W > its send − the first answer (lo). While hi − lo is wider than
// hiddenTight of hi, each cycle's reset is told earlier than hi: a step
// of hiddenStep of hi down, or the middle of the interval, whichever is
// later. A refused probe costs its 429 but no time: its Retry-After says
// the reset is within a whole second, hi that it is by the cycle's
// first answer + hi, earlier, so the key's pause ends there (the refused
// request's own retry still waits its Retry-After). A refusal of any
// other unit (sent before the cycle's reset, or at or after first + hi),
// or one whose Retry-After puts the reset after first + hi even rounded
// (a − 1 s from it), contradicts the bounds: they are dropped, the pause
// is the server's, and the cycle ends as below. The rolling budget above: its window of
// 1.11 s probed down to 1.005 s over ten cycles, one probe refused (400
// units in 19.7 s, 1.04× the budget's 19 s; 21.3 s unprobed).
//
// The window, not a pace: a budget counted over a rolling window admits
// its q units at once every w, which a pace of q/w with a bucket deep
// enough to burst overruns (q at once, and one more q/w later, in less
// than w), and a pace one unit deep spends a second more than the budget
// needs over a run of 400 units at 20 a second.
//
// A key is remembered from its first refusal with a Retry-After (so a
// Transport keeps nothing for keys that are never refused), and its
// cycles counted from there: three refusals learn a budget. Two cycles in
// a row must agree (their q within hiddenAgree, or one unit; their w
// within hiddenAgree) before the window is used: a lone refusal, or
// refusals that timer jitter draws from a server bucket with no slack (a
// refusal after 500 units, the next after 1,300), is no budget. A
// refusal while the window is used, but a probe's, ends its cycle as any
// does: the two last cycles decide again. The budget is forgotten hiddenKeep after the
// last refusal (a budget that grew is then found again, at the cost of
// two refusals' cycles), and for a key whose responses state a limit of
// their own (the rules for stated windows apply). Only an in-process
// [Limiter]'s keys take it: a waiter shared with other processes
// (distributed) would take one process's share of the budget for the
// whole budget.
const (
	hiddenAgree = 0.1
	hiddenKeep  = 60 * time.Second
	hiddenTight = 1.0 / 100
	hiddenStep  = 1.0 / 32
)

// hidden is what a Transport learned of its keys' hidden budgets. The
// zero value knows nothing; it is safe for concurrent use. At most
// learnedKeys keys are remembered; past that an arbitrary one is
// forgotten (it learns again from its next cycles).
type hidden struct {
	some atomic.Bool // keys is not empty: read without mu on every response
	mu   sync.Mutex  // protects keys
	keys map[string]*budgetSeen
}

// cycle is one burst of a key's: q units accepted from the first
// acceptance (sent at sent, answered at first) until a refusal, or until
// the learned window's end.
type cycle struct {
	q  float64
	w  time.Duration // r + Retry-After − sent, for a cycle a refusal ended
	lo time.Duration // the refusal's send + Retry-After − 1 s − first: W is longer
}

type budgetSeen struct {
	open  bool          // a cycle is open: a unit was accepted since it began
	sent  time.Time     // when the cycle's first accepted unit was sent
	first time.Time     // when its response came
	n     float64       // units accepted in the cycle
	w     time.Duration // the open cycle's window as told (its reset first + w); 0 until learned

	cycles  [2]cycle // the last two cycles a refusal ended, newest last
	ended   int      // how many of cycles are set
	refused time.Time

	lo, hi time.Duration // what probes told of the window: W > lo, W ≤ hi (0: nothing)
}

// budget returns the window of q units per w that the last two cycles
// agree on.
func (b *budgetSeen) budget() (q float64, w time.Duration, ok bool) {
	if b.ended < 2 {
		return 0, 0, false
	}
	c0, c1 := b.cycles[0], b.cycles[1]
	q, w = min(c0.q, c1.q), min(c0.w, c1.w)
	dq, dw := math.Abs(c0.q-c1.q), (c0.w - c1.w).Abs()
	if q < 1 || w <= 0 || dq > max(1, hiddenAgree*max(c0.q, c1.q)) || float64(dw) > hiddenAgree*float64(max(c0.w, c1.w)) {
		return 0, 0, false
	}
	return q, w, true
}

// bounds returns the budget's q and the interval (lo, hi] its window is
// in: the cycles' bounds intersected with the probes'. Probes' bounds
// that leave the interval empty are dropped (see above).
func (b *budgetSeen) bounds() (q float64, lo, hi time.Duration, ok bool) {
	q, hi, ok = b.budget()
	if !ok {
		return 0, 0, 0, false
	}
	lo = max(b.cycles[0].lo, b.cycles[1].lo)
	if plo, phi := max(lo, b.lo), min(hi, b.hi); b.hi > 0 && plo < phi {
		lo, hi = plo, phi
	} else if b.hi == 0 && b.lo < hi {
		lo = max(lo, b.lo)
	} else {
		b.lo, b.hi = 0, 0
	}
	return q, lo, hi, true
}

// target returns the window a cycle is told, from the interval (lo, hi]:
// hi once the interval is within hiddenTight of it, else a step below
// it (see above).
func target(lo, hi time.Duration) time.Duration {
	if float64(hi-lo) <= hiddenTight*float64(hi) {
		return hi
	}
	return max(hi-time.Duration(hiddenStep*float64(hi)), lo+(hi-lo)/2)
}

// see learns from a response at now to n units sent at sent: refused
// with a pause (Retry-After) of pause, or counted (any other response).
// told says the response states a limit of its own. It returns the
// budget's window as the key's waiter is to take it (left units until
// reset from now, of size per length) when one is learned and the
// response was counted, or was a probe's refusal (probe: the key's pause
// is to end at the reset, see above).
func (h *hidden) see(key string, now, sent time.Time, n float64, refused bool, pause time.Duration, told bool) (left float64, reset time.Duration, size float64, length time.Duration, ok, probe bool) {
	if !h.some.Load() && (told || !refused || pause <= 0) {
		return // nothing to learn until a refusal that says when to come back
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	defer func() { h.some.Store(len(h.keys) > 0) }()
	b := h.keys[key]
	if told {
		delete(h.keys, key)
		return
	}
	if b == nil {
		if !refused || pause <= 0 {
			return // the first cycle is the one after the first refusal
		}
		if h.keys == nil {
			h.keys = make(map[string]*budgetSeen)
		}
		if len(h.keys) >= learnedKeys {
			for k := range h.keys {
				delete(h.keys, k)
				break
			}
		}
		b = new(budgetSeen)
		h.keys[key] = b
	}
	if b.ended > 0 && now.Sub(b.refused) > hiddenKeep {
		*b = budgetSeen{open: b.open, sent: b.sent, first: b.first, n: b.n}
	}
	q, lo, hi, learned := b.bounds()
	if refused {
		if pause <= 0 {
			return
		}
		b.refused = now
		if b.open && learned && b.w > 0 && b.w < hi && b.n >= q && !sent.Before(b.first.Add(b.w)) && sent.Before(b.first.Add(hi)) && now.Add(pause-time.Second).Before(b.first.Add(hi)) {
			// A probe refused: its cycle's first unit had not left.
			b.lo, b.hi, b.w = max(b.lo, sent.Sub(b.first)), hi, hi
			return 0, b.first.Add(hi).Sub(now), q, hi, true, true
		}
		if b.open {
			b.cycles[0], b.cycles[1] = b.cycles[1], cycle{q: b.n, w: now.Add(pause).Sub(b.sent), lo: max(sent.Add(pause-time.Second).Sub(b.first), 0)}
			b.ended = min(b.ended+1, 2)
			b.open = false
		}
		b.lo, b.hi = 0, 0
		return
	}
	if !b.open || (b.w > 0 && !now.Before(b.first.Add(b.w))) {
		if b.open && learned && b.w > 0 && b.n >= q {
			// The cycle spent the budget, and a unit is accepted past
			// its window: the cycle's first unit had left.
			if d := now.Sub(b.sent); b.hi == 0 || d < b.hi {
				b.hi = d
			}
			q, lo, hi, learned = b.bounds()
		}
		b.open, b.sent, b.first, b.n, b.w = true, sent, now, 0, 0
	}
	b.n += n
	if !learned {
		return
	}
	if b.w == 0 {
		b.w = target(lo, hi)
	}
	return max(q-b.n, 0), b.first.Add(b.w).Sub(now), q, b.w, true, false
}

// hiddenBudget learns from a response to a key of an in-process
// [Limiter] (w), sent at sent and answered at now, and sets f's window
// to the key's hidden budget when one is learned (see above). Not for a
// key with further limits (Limiter.Limits): its user stated what the
// server counts in several units, and a refusal for one of them (a
// completion's tokens charged past the estimate while a request was on
// its way) read as a budget in requests slowed an LLM client by a fifth
// (TestLLMLimits/estimate, one run in about thirty). refused
// says it was a 429 or 503, said that the server said to wait wait
// (Retry-After), told that it states a limit of its own.
func (t *Transport) hiddenBudget(f *Feedback, w Waiter, key string, sent, now time.Time, refused, said bool, wait time.Duration, told bool) {
	b, local := w.(*bucket)
	if !local || t.DisableAdaptive || f.HasRemaining || b.hasLimits() {
		return
	}
	if !said {
		wait = 0
	}
	left, reset, size, length, ok, probe := t.hidden.see(key, now, sent, float64(max(f.Cost, 1)), refused, wait, told)
	if ok {
		f.Remaining, f.Reset, f.Size, f.Window, f.HasRemaining = left, reset, size, length, true
	}
	if probe {
		f.Pause = min(f.Pause, max(reset, 0))
	}
}

// hasLimits reports whether the key has further limits ([Limiter.Limits]).
func (b *bucket) hasLimits() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.xunits) > 0
}
