package schedtest

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"
)

// Settled costs (Op.SettleAfter): a wait's units are amended at its
// settle, by actual − N, on the bucket a checker replays. The rule is
// schedule.go's: a charge is GCRA's units going at the settle,
// max(tat, s) + d·interval; a give-back moves tat back and meets GCRA's
// floor, max(tat − g·interval, s), so the bucket never holds more than
// its burst.

// amend is a settle that took effect: at t, d more units (negative: given
// back).
type amend struct{ t, d float64 }

// amends returns the settles of the waits that succeeded, in time order,
// and reports the settles that failed.
func (c *checker) amends() []amend {
	var a []amend
	for i, o := range c.seq.Ops {
		r := c.lg.Results[i]
		if o.Kind != Wait || !r.Settled {
			continue
		}
		if r.SettleErr != nil {
			c.errorf("settle: wait %d settled as %d failed: %v", i, o.Actual, r.SettleErr)
			continue
		}
		if d := float64(o.Actual - o.N); d != 0 {
			a = append(a, amend{ns(r.SettleAt), d})
		}
	}
	sortAmends(a)
	return a
}

// amendsUnits returns the settles of the waits that succeeded in the
// further limit L (Op.ActualUnits), in time order; their failures are
// reported by amends.
func (c *checker) amendsUnits(L int) []amend {
	var a []amend
	for i, o := range c.seq.Ops {
		r := c.lg.Results[i]
		if o.Kind != Wait || !r.Settled || r.SettleErr != nil || L >= len(o.ActualUnits) {
			continue
		}
		if d := float64(o.ActualUnits[L]) - c.units(i, L); d != 0 {
			a = append(a, amend{ns(r.SettleAt), d})
		}
	}
	sortAmends(a)
	return a
}

// sortAmends sorts a in time order.
func sortAmends(a []amend) {
	// At one instant, give-backs before charges: the later ideal schedule
	// of the two orders (a give-back first meets the floor before the
	// charge fills the bucket), for conserve; ledger allows both.
	slices.SortStableFunc(a, func(x, y amend) int {
		if x.t != y.t {
			return int(x.t - y.t)
		}
		return cmp.Compare(x.d, y.d)
	})
}

// charges reports whether a settle charged more than a wait spent: turns
// may then move later, as feedback moves them.
func (s Sequence) charges() bool {
	return slices.ContainsFunc(s.Ops, func(o Op) bool {
		if o.SettleAfter > 0 && o.Actual > o.N {
			return true
		}
		for L, n := range o.ActualUnits {
			if n > o.Units[L] {
				return true
			}
		}
		return false
	})
}

// apply returns tat after the amend a, at interval.
func (a amend) apply(tat, interval float64) float64 {
	if a.d > 0 {
		return max(tat, a.t) + a.d*interval
	}
	return max(tat+a.d*interval, a.t)
}

// ledger replays the admissions adm (in time order) and the amends am
// through a bucket of interval and burst, and reports the first admission
// it does not allow: never over, counting settled costs. Events within
// tol of each other are one instant, whose order the log cannot tell (a
// settle lets the units whose turns have come go first, then amends, and
// two settles of one instant may run in either order; a give-back and a
// charge do not commute: GCRA's floor meets the one that comes first): an
// instant passes if some order of its events admits every admission, and
// leaves the bucket that the emptiest such order leaves, so that no order
// the implementation could have taken is flagged.
func (c *checker) ledger(adm []int, am []amend, interval, burst float64, what string, units func(i int) float64) {
	var evs []ledgerEv
	for _, i := range adm {
		if n := units(i); n > 0 {
			evs = append(evs, ledgerEv{c.ret(i), n, i})
		}
	}
	for _, a := range am {
		evs = append(evs, ledgerEv{a.t, a.d, -1})
	}
	slices.SortStableFunc(evs, func(x, y ledgerEv) int { return int(x.t - y.t) })
	l := ledgerRun{interval: interval, tau: burst * interval, tol: c.tol}
	tat := math.Inf(-1)
	for k := 0; k < len(evs); {
		j := k
		for j < len(evs) && evs[j].t <= evs[k].t+c.tol {
			j++
		}
		next, ok := l.instant(tat, evs[k:j])
		if !ok {
			// Name the first admission that fails with the instant's
			// give-backs first and its charges last.
			chk := tat
			for _, e := range evs[k:j] {
				if e.i < 0 && e.n < 0 {
					chk = l.apply(chk, e)
				}
			}
			for _, e := range evs[k:j] {
				if e.i < 0 {
					continue
				}
				if early := chk + e.n*interval - l.tau; e.t+c.tol < early {
					c.errorf("never over (%s, settled costs): wait %d admitted %v units at %v; the bucket allows them from %v",
						what, e.i, e.n, time.Duration(e.t), time.Duration(early))
					return
				}
				chk = l.apply(chk, e)
			}
			c.errorf("never over (%s, settled costs): no order of the events at %v admits them all", what, time.Duration(evs[k].t))
			return
		}
		tat, k = next, j
	}
}

// ledgerEv is an admission (i ≥ 0: wait i, n units) or an amend (i < 0:
// n units more, or back) at t.
type ledgerEv struct {
	t, n float64
	i    int
}

type ledgerRun struct{ interval, tau, tol float64 }

// apply returns tat after e (an admission that conforms, or an amend).
func (l ledgerRun) apply(tat float64, e ledgerEv) float64 {
	if e.i >= 0 || e.n > 0 {
		return max(tat, e.t) + e.n*l.interval
	}
	return max(tat+e.n*l.interval, e.t)
}

// instant returns the least tat that some order of evs, every admission
// conforming, leaves from tat; false if no order does. An instant holds a
// few events: every order is tried (those of equal events once).
func (l ledgerRun) instant(tat float64, evs []ledgerEv) (float64, bool) {
	if len(evs) == 0 {
		return tat, true
	}
	if len(evs) > 8 { // too many to try every order: the instant's events in time order
		for _, e := range evs {
			if e.i >= 0 && e.t+l.tol < tat+e.n*l.interval-l.tau {
				return 0, false
			}
			tat = l.apply(tat, e)
		}
		return tat, true
	}
	best, ok := math.Inf(1), false
	for k, e := range evs {
		if slices.ContainsFunc(evs[:k], func(x ledgerEv) bool { return x.t == e.t && (x.i < 0) == (e.i < 0) && x.n == e.n }) {
			continue // the same event tried already
		}
		if e.i >= 0 && e.t+l.tol < tat+e.n*l.interval-l.tau {
			continue // not admitted here
		}
		rest := append(slices.Clone(evs[:k]), evs[k+1:]...)
		if t, good := l.instant(l.apply(tat, e), rest); good && t < best {
			best, ok = t, true
		}
	}
	return best, ok
}

// debt returns the units charged by settles before t.
func debt(am []amend, t float64) float64 {
	d := 0.0
	for _, a := range am {
		if a.t < t && a.d > 0 {
			d += a.d
		}
	}
	return d
}

// bucketAt returns the ideal bucket's tat at call: the ideal admissions
// adm up to call and the amends before it (a give-back at the call's
// instant may have come after it, a charge before), settles first at
// one instant, as conserve builds the ideal schedule.
func (c *checker) bucketAt(call, interval float64, adm []gone, am []amend) float64 {
	type ev struct {
		t, n  float64
		admit bool
	}
	var evs []ev
	for _, a := range adm {
		if a.t <= call {
			evs = append(evs, ev{a.t, a.n, true})
		}
	}
	for _, a := range am {
		if (a.d > 0 && a.t <= call+c.tol) || (a.d < 0 && a.t < call-c.tol) {
			evs = append(evs, ev{a.t, a.d, false})
		}
	}
	slices.SortStableFunc(evs, func(x, y ev) int {
		if x.t != y.t {
			return int(x.t - y.t)
		}
		if x.admit == y.admit {
			return 0
		}
		if x.admit {
			return 1
		}
		return -1
	})
	tat := math.Inf(-1)
	for _, e := range evs {
		if e.admit {
			tat = max(tat, e.t) + e.n*interval
		} else {
			tat = amend{e.t, e.n}.apply(tat, interval)
		}
	}
	return tat
}

// idealTurn returns the ideal turn of a wait of n units that may go from
// t0: the bucket's tat, with the amends from am[k] on taking effect as
// time passes (those at the turn's instant before it), and the tat and
// the index of the amends that took effect by then.
func (c *checker) idealTurn(t0, tat, n, interval, tau float64, am []amend, k int) (float64, float64, int) {
	t := t0
	for k < len(am) && am[k].t <= t+c.tol {
		tat, k = am[k].apply(tat, interval), k+1
	}
	for {
		x := tat + n*interval - tau
		if interval == 0 || x <= t {
			return t, tat, k
		}
		if k < len(am) && am[k].t <= x+c.tol {
			t = max(t, am[k].t)
			for k < len(am) && am[k].t <= t+c.tol {
				tat, k = am[k].apply(tat, interval), k+1
			}
			continue
		}
		return x, tat, k
	}
}

func (a amend) String() string { return fmt.Sprintf("%+v at %v", a.d, time.Duration(a.t)) }
