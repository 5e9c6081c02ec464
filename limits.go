package throttle

import (
	"context"
	"fmt"
	"math"

	"golang.org/x/time/rate"
)

// UnitRate is a token bucket in a unit of its own: one of a key's further
// limits ([Limiter.Limits]), beside the bucket of Limit and Burst. APIs
// state several limits at once: OpenAI's requests per minute AND tokens
// per minute are Limit and Burst in requests and a UnitRate in "tokens":
//
//	lim := &throttle.Limiter{
//		Limit: 500.0 / 60, Burst: 500, // requests
//		Limits: []throttle.UnitRate{
//			{Unit: "tokens", Rate: throttle.Rate{Limit: 30000.0 / 60, Burst: 30000}},
//		},
//	}
//
// Its Rate means what a key's Rate means: Limit units a second, at most
// Burst at once; rate.Inf or the zero Rate is no limit (the unit is
// counted by nothing), Limit 0 with a Burst lets Burst units through and
// then nothing, Burst 0 is 1.
type UnitRate struct {
	// Unit names the unit the limit counts, as a [Cost] names it. It must
	// not be empty (the empty unit is Limit and Burst's) nor name two
	// limits.
	Unit string
	Rate
}

// Cost is what one wait spends: N units of the key's first limit (Limit
// and Burst, the unit WaitN counts) and, per unit, units of its further
// limits ([Limiter.Limits]). The zero Cost is one unit of the first limit
// and nothing of the others.
type Cost struct {
	// N is the units of the first limit; 0 means 1 (a request is a
	// request, whatever else it costs).
	N int
	// Units are the units of the further limits, e.g. {{"tokens", 1200}};
	// a unit not named costs nothing. A unit the key has no limit in is an
	// error ([ErrInvalidLimit]), a cost above its limit's burst too
	// ([ErrCostExceedsBurst]).
	Units []UnitCost
}

// UnitCost is a cost of N units in Unit: see [Cost].
type UnitCost struct {
	Unit string
	N    int
}

// CostWaiter is a Waiter whose keys carry several limits: WaitCost waits
// until every limit the cost names can pay it, then spends it on all of
// them at once, or on none (an error, a deadline, a cancel gives back
// every unit). Waits on a key are served in arrival order whatever their
// costs; a wait's turn is the latest its limits give it. WaitN(ctx, n) is
// WaitCost(ctx, Cost{N: n}) for n > 0. The keys of [Limiter] implement it.
type CostWaiter interface {
	Waiter
	WaitCost(ctx context.Context, c Cost) error
}

// xlimits converts l.Limits to the schedule's further limits; an error
// for a configuration no wait can use.
func (l *Limiter) xlimits() ([]xlimit, []string, error) {
	if len(l.Limits) == 0 {
		return nil, nil, nil
	}
	lim := make([]xlimit, len(l.Limits))
	units := make([]string, len(l.Limits))
	for i, u := range l.Limits {
		switch {
		case u.Unit == "":
			return nil, nil, fmt.Errorf("throttle: Limits[%d] has no unit: %w", i, ErrInvalidLimit)
		case u.Limit < 0 || u.Burst < 0 || math.IsNaN(float64(u.Limit)):
			return nil, nil, fmt.Errorf("throttle: Limits[%d] (%q) has limit %v, burst %d: %w", i, u.Unit, u.Limit, u.Burst, ErrInvalidLimit)
		}
		for _, v := range units[:i] {
			if v == u.Unit {
				return nil, nil, fmt.Errorf("throttle: two Limits in unit %q: %w", u.Unit, ErrInvalidLimit)
			}
		}
		units[i] = u.Unit
		burst := float64(max(u.Burst, 1))
		lim[i].burst = burst
		if u.Limit != rate.Inf && (u.Limit != 0 || u.Burst != 0) {
			lim[i].interval = min(1e9/float64(u.Limit), neverInterval)
			lim[i].tau = burst * lim[i].interval
		}
	}
	return lim, units, nil
}

// costOf converts units to the further limits' costs, in b.xcost (nil
// for a key without further limits). It requires b.mu.
func (b *bucket) costOf(units []UnitCost) ([]float64, error) {
	clear(b.xcost)
	for _, u := range units {
		i := 0
		for i < len(b.xunits) && b.xunits[i] != u.Unit {
			i++
		}
		switch {
		case i == len(b.xunits):
			return nil, fmt.Errorf("throttle: %q has no limit in unit %q: %w", b.key, u.Unit, ErrInvalidLimit)
		case u.N < 0:
			return nil, fmt.Errorf("throttle: wait for %d %s of %q: %w", u.N, u.Unit, b.key, ErrInvalidLimit)
		}
		b.xcost[i] += float64(u.N)
		if l := b.s.x.lim[i]; l.interval > 0 && b.xcost[i] > l.burst {
			return nil, fmt.Errorf("throttle: wait for %v %s of %q, burst %v: %w", b.xcost[i], u.Unit, b.key, l.burst, ErrCostExceedsBurst)
		}
	}
	return b.xcost, nil
}

// WaitCost waits for c on the key's limits: see [CostWaiter].
func (b *bucket) WaitCost(ctx context.Context, c Cost) error {
	n := c.N
	if n == 0 {
		n = 1
	}
	return b.waitUnits(ctx, n, c.Units, queueFirst)
}

// WaitCost waits for c on the Limiter's own quota (the key ""): see
// [CostWaiter].
func (l *Limiter) WaitCost(ctx context.Context, c Cost) error {
	l.once.Do(l.init)
	return l.def.WaitCost(ctx, c)
}

// xcost0 returns the cost of a wait that names no unit: nothing of the
// further limits. It requires b.mu.
func (b *bucket) xcost0() []float64 {
	clear(b.xcost)
	return b.xcost
}
