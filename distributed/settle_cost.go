package distributed

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/throttle-go/throttle"
)

// SettleCost implements [throttle.CostSettler] for the whole fleet: one
// script call (op msettle) amends a wait of the key that spent spent to
// actual, the first limit by Settle's rule and each of Quota.Limits by
// CostSettler's (a bucket's debt or give-back under its burst; a
// window's count of the current window, Redis's clock; a charge of at
// most the limit's burst or count, the rest dropped), and publishes
// the move so that the waits sleeping in every process ask for their
// turns again. A settle that changes nothing makes no call. Its errors
// are Settle's (the costs are checked as a wait's before any call; a
// unit with no limit fails with [throttle.ErrInvalidLimit]), and a Quota
// without Limits settles N alone (a unit named fails).
func (w *keyWaiter) SettleCost(ctx context.Context, spent, actual throttle.Cost) error {
	_, err := w.settleCost(ctx, spent, actual)
	return err
}

// settleCost is SettleCost, and returns the units the script dropped of
// each charge (see settle); nil when no call was made.
func (w *keyWaiter) settleCost(ctx context.Context, spent, actual throttle.Cost) (dropped []int64, err error) {
	sn, an := spent.First(), actual.First()
	q := w.q
	if q.xconfig() == nil {
		if len(spent.Units)+len(actual.Units) > 0 {
			u := actual.Units
			if len(spent.Units) > 0 {
				u = spent.Units
			}
			return nil, fmt.Errorf("%w: quota %q has no limit in unit %q", throttle.ErrInvalidLimit, q.name, u[0].Unit)
		}
		return w.settleN(ctx, sn, an)
	}
	if an < 0 {
		return nil, fmt.Errorf("%w: settle %d units of %q as %d: costs are never negative", throttle.ErrInvalidLimit, sn, w.key, an)
	}
	if err := q.check(sn); err != nil {
		return nil, err
	}
	s, err := q.xargs(spent.Units)
	if err != nil {
		return nil, err
	}
	// actual's units: known, not negative, of any size (a charge the
	// script bounds).
	a, err := q.xargs(nil)
	if err != nil {
		return nil, err
	}
	x := q.xconfig()
	d := make([]float64, len(x.units))
	for _, u := range actual.Units {
		if u.N < 0 {
			return nil, fmt.Errorf("%w: settle %d %s of %q: costs are never negative", throttle.ErrInvalidLimit, u.N, u.Unit, w.key)
		}
		found := false
		for i, v := range x.units {
			if v == u.Unit {
				found = true
				d[i] += float64(u.N)
			}
		}
		if !found {
			return nil, fmt.Errorf("%w: quota %q has no limit in unit %q", throttle.ErrInvalidLimit, q.name, u.Unit)
		}
	}
	change := sn != an
	for i := range d {
		f, _ := strconv.ParseFloat(s[1+i].(string), 64)
		if !slices.ContainsFunc(actual.Units, func(u throttle.UnitCost) bool { return u.Unit == x.units[i] }) {
			f = 0 // a unit actual does not name stays as spent
		}
		d[i] -= f
		a[1+i] = strconv.FormatFloat(d[i], 'g', -1, 64)
		change = change || d[i] != 0
	}
	if !change {
		return nil, nil
	}
	args := append([]any{sn, an, "", "", "", ""}, a...)
	dropped, err = w.settle(ctx, "msettle", args...)
	if lerr := w.limitsError(err); lerr != nil {
		return nil, lerr
	}
	if err != nil {
		return nil, fmt.Errorf("settling %q: %w", w.key, unavailable(err))
	}
	return dropped, nil
}

// SettleCost amends a wait on the quota's own key (the one For("")
// returns): see keyWaiter's SettleCost.
func (q *Quota) SettleCost(ctx context.Context, spent, actual throttle.Cost) error {
	return q.defaultWaiter().SettleCost(ctx, spent, actual)
}

var (
	_ throttle.CostSettler = (*keyWaiter)(nil)
	_ throttle.CostSettler = (*Quota)(nil)
)
