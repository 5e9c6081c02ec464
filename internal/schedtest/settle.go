package schedtest

import (
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
	slices.SortStableFunc(a, func(x, y amend) int { return int(x.t - y.t) })
	return a
}

// charges reports whether a settle charged more than a wait spent: turns
// may then move later, as feedback moves them.
func (s Sequence) charges() bool {
	return slices.ContainsFunc(s.Ops, func(o Op) bool { return o.SettleAfter > 0 && o.Actual > o.N })
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
// tol of each other are one instant, whose order the log cannot tell
// (a settle lets the units whose turns have come go first, then amends:
// an admission may come before or after a give-back of its instant):
// its give-backs are applied one by one only when an admission needs
// them, its charges after its admissions, so that no order the
// implementation could have taken is flagged.
func (c *checker) ledger(adm []int, am []amend, interval, burst float64, what string) {
	type ev struct {
		t, n float64
		i    int // the admitted wait; -1 for an amend
	}
	var evs []ev
	for _, i := range adm {
		evs = append(evs, ev{c.ret(i), float64(c.seq.Ops[i].N), i})
	}
	for _, a := range am {
		evs = append(evs, ev{a.t, a.d, -1})
	}
	slices.SortStableFunc(evs, func(x, y ev) int { return int(x.t - y.t) })
	tau := burst * interval
	tat := math.Inf(-1)
	for k := 0; k < len(evs); {
		j := k
		for j < len(evs) && evs[j].t <= evs[k].t+c.tol {
			j++
		}
		var backs, charges []amend
		for _, e := range evs[k:j] {
			switch {
			case e.i < 0 && e.n < 0:
				backs = append(backs, amend{e.t, e.n})
			case e.i < 0:
				charges = append(charges, amend{e.t, e.n})
			}
		}
		for _, e := range evs[k:j] {
			if e.i < 0 {
				continue
			}
			for len(backs) > 0 && tat+e.n*interval-tau > e.t+c.tol {
				tat, backs = backs[0].apply(tat, interval), backs[1:]
			}
			if early := tat + e.n*interval - tau; e.t+c.tol < early {
				c.errorf("never over (%s, settled costs): wait %d admitted %v units at %v; the bucket allows them from %v",
					what, e.i, e.n, time.Duration(e.t), time.Duration(early))
				return
			}
			tat = max(tat, e.t) + e.n*interval
		}
		for _, a := range charges {
			tat = a.apply(tat, interval)
		}
		for _, a := range backs {
			tat = a.apply(tat, interval)
		}
		k = j
	}
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
