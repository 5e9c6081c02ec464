package schedtest

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/throttle-go/throttle"
)

// conserve, for sequences of first attempts with no feedback: every wait
// is admitted by its turn in the ideal FIFO schedule of the configured
// bucket, in which a wait refused at its reservation takes no place, one
// that failed later leaves the queue when it failed, one that succeeded
// spends its units at its ideal turn, and a settle amends them when it
// comes (exact settle: units given back are used by the next waits, a
// charge delays them; see settle.go). This catches refunds that leave
// units unused (a wait later than its ideal turn), turns handed to two
// callers (caught by neverOver), waits that fail after their ideal turn
// had come, and refusals whose turn was within their deadline.
func (c *checker) conserve() {
	cfg := c.seq.Config
	interval := 0.0
	if cfg.Limit > 0 {
		interval = 1e9 / cfg.Limit
	}
	tau := float64(cfg.burst()) * interval
	am := c.am
	var (
		tat   = math.Inf(-1) // the ideal bucket, after adm and am[:next]
		next  int            // the amends that took effect in tat
		adm   []gone         // ideal admissions, in order
		last  = math.Inf(-1) // when the waits ahead have all left the queue
		queue []struct{ leave, n float64 }
	)
	for _, i := range c.waits {
		call, n := c.call(i), float64(c.seq.Ops[i].N)
		if c.refused(i) {
			// Its turn at its call: the ideal bucket as of then, and the
			// units still queued ahead.
			t0 := c.bucketAt(call, interval, adm, am)
			// A wait that left at the instant of the call may have left
			// after it (a cancel and a call at one instant run in either
			// order): it counts as ahead.
			ahead := 0.0
			for _, q := range queue {
				if q.leave+c.tol >= call {
					ahead += q.n
				}
			}
			turn := call
			if interval > 0 {
				turn = max(turn, max(t0, call)+(ahead+n)*interval-tau)
			}
			if dl := ns(c.lg.Results[i].Deadline); turn <= dl-c.tol {
				c.errorf("refund: wait %d refused at %v though its turn in the ideal FIFO schedule was %v, within its deadline %v",
					i, c.lg.Results[i].Return, time.Duration(turn), time.Duration(dl))
			}
			continue
		}
		t, at, k := c.idealTurn(max(call, last), tat, n, interval, tau, am, next)
		if c.ok(i) {
			if ret := c.ret(i); ret > t+c.tol {
				// A give-back settled within tol of the call may have
				// reached the store after it (two calls of one instant
				// run in either order): the turn without it then.
				tl, _, _ := c.idealTurn(max(call, last), tat, n, interval, tau, c.giveBacksAfter(am, next, call), next)
				if ret > tl+c.tol {
					c.errorf("refund: wait %d admitted at %v, later than its turn %v in the ideal FIFO schedule",
						i, time.Duration(ret), time.Duration(tl))
				}
			}
			tat, next = max(at, t)+n*interval, k
			adm = append(adm, gone{t, n})
			last = max(last, t)
			queue = append(queue, struct{ leave, n float64 }{t, n})
			continue
		}
		f := c.ret(i)
		if t+c.tol < f {
			c.errorf("refund: wait %d failed at %v, though its turn in the ideal FIFO schedule came at %v",
				i, time.Duration(f), time.Duration(t))
		}
		if f+c.tol >= t {
			// It failed within tol of its turn: on the real clock the
			// cancel may reach the store after the turn, which then
			// spent its units (the safe side: lost, never sent twice).
			// The ideal schedule spends them, so that the waits behind
			// are not held to a refund that need not have happened;
			// never over still counts what was admitted.
			tat, next = max(at, t)+n*interval, k
			adm = append(adm, gone{t, n})
			last = max(last, t)
			queue = append(queue, struct{ leave, n float64 }{t, n})
			continue
		}
		last = max(last, min(f, t))
		queue = append(queue, struct{ leave, n float64 }{min(f, t), n})
	}
}

// gone is an ideal admission: n units at t.
type gone struct{ t, n float64 }

// noWedge, for sequences with feedback: every wait that succeeded was
// admitted by
//
//	max(call, E + Recovery + 2·interval) + units·perUnit + tickets·probes
//
// where E is when the last pause, window, rejection or declared limit
// applied before its return ended (a pause's end, a window's reset, a
// rejection's or declared limit's arrival),
// units are its own and those of the waits queued ahead of it (or passing
// it from the retry queue), perUnit the slowest pace that may then be in
// force (the configured interval; without one, the slowest declared
// interval, and 1 s a unit after a rejection: a cut's floor is one request
// a second), and probes two probe periods a ticket once a window was told,
// or three refusals that said when to come back may have learned a hidden
// budget's (after its reset, until a response tells the next, windows go a
// probe at a time).
func (c *checker) noWedge() {
	cfg := c.seq.Config
	interval := 0.0
	if cfg.Limit > 0 {
		interval = 1e9 / cfg.Limit
	}
	for _, i := range c.waits {
		if !c.ok(i) {
			continue
		}
		call, ret := c.call(i), c.ret(i)
		end := math.Inf(-1)
		perUnit, windows := interval, false
		refusals := 0
		for k, o := range c.seq.Ops {
			if o.Kind == Wait || c.call(k) > ret {
				continue
			}
			if d := o.pause(); d > 0 {
				end = max(end, c.call(k)+ns(d))
			}
			if (o.F.Verdict == throttle.Refused || o.F.Verdict == throttle.RefusedBare) && o.F.Pause > 0 && o.F.Window == nil {
				// Three refusals that say when to come back may learn a
				// hidden budget: a window, spent until the pause's end,
				// then probes (schedule_budget.go).
				if refusals++; refusals >= 3 {
					windows = true
				}
			}
			if o.F.Window != nil {
				end = max(end, c.call(k)+ns(o.F.Window.Reset))
				windows = true
			}
			if o.F.Verdict == throttle.RefusedBare {
				end = max(end, c.ret(k))
				if interval == 0 {
					perUnit = max(perUnit, 1e9)
				}
			}
			if o.F.Declared != nil && interval == 0 && o.F.Declared.Rate > 0 {
				// A declared limit changes the pace and the bucket's depth
				// (a smaller burst moves every queued turn later).
				end = max(end, c.ret(k))
				perUnit = max(perUnit, 1e9/float64(o.F.Declared.Rate))
			}
		}
		from := call
		if !math.IsInf(end, -1) {
			from = max(call, end+ns(Recovery)+2*interval)
		}
		units, tickets := float64(c.seq.Ops[i].N), 1.0
		queued := []int{i}
		for _, j := range c.waits {
			if j == i {
				continue
			}
			rj, ri := c.seq.Ops[j].Retry, c.seq.Ops[i].Retry
			ahead := c.before(j, i) && (rj || !ri) && c.ret(j) > call
			passing := rj && !ri && !c.before(j, i) && c.call(j) < ret
			// Another class's first attempts share the key with i's
			// (classes): any of them that went while i waited.
			if !rj && !ri && c.seq.Ops[j].Class != c.seq.Ops[i].Class && c.call(j) < ret && c.ret(j) > call {
				passing = true
			}
			if ahead || passing {
				units += float64(c.seq.Ops[j].N)
				tickets++
				queued = append(queued, j)
			}
		}
		// A charge settled before it returned is units to pay too, in
		// the first limit and in the further ones.
		units += debt(c.am, ret)
		bound := from + units*perUnit + c.extraWork(queued) + c.extraDebt(ret)
		if windows {
			bound += tickets * 2 * ns(probePeriod)
		}
		if ret > bound+c.tol {
			c.errorf("no wedge: wait %d (called %v, %v units with those ahead) admitted at %v, after its bound %v (feedback over at %v)",
				i, time.Duration(call), units, time.Duration(ret), time.Duration(bound), time.Duration(end))
		}
	}
}

// giveBacksAfter returns am with the give-backs from index next on that
// came within tol of call moved to just after call + tol: the order in
// which a call and a settle of one instant reached the store.
func (c *checker) giveBacksAfter(am []amend, next int, call float64) []amend {
	out := slices.Clone(am)
	moved := false
	for j := next; j < len(out); j++ {
		if out[j].d < 0 && math.Abs(out[j].t-call) <= c.tol {
			out[j].t, moved = call+2*c.tol, true
		}
	}
	if moved {
		slices.SortStableFunc(out[next:], func(a, b amend) int { return cmp.Compare(a.t, b.t) })
	}
	return out
}
