package throttle

import (
	"context"
	"fmt"
	"slices"
)

// CostSettler is a [Settler] whose keys carry several limits: SettleCost
// amends a wait that spent the [Cost] spent to what it really cost,
// actual, in every unit at once: an LLM call waited for its estimate in
// tokens (its max_tokens) and settles the tokens its response's usage
// reports. Per unit, less used gives the difference back on each of the
// unit's limits, more used charges it (a debt the next waits pay), by
// [Settler]'s rule for a bucket; on a window (see [Window]) a charge
// counts in the window the settle falls in, and a give-back comes off
// that window's count, never below zero, and only if units went in it
// (units given back after their window ended are lost, as a bucket's
// past its burst are; a window from first use counts them in its
// current window, and a charge after it ended starts the next); on a
// sliding log a charge is units gone at the settle, and a give-back
// comes off the newest units still inside the last Per (the log keeps
// no receipt of whose they were; an interval a later wait counts that
// held them holds the settle too). N is settled as Settler's Settle(spent.N,
// actual.N), N 0 being 1 as in a wait; Retry is ignored. A unit actual
// does not name is left as spent (settle the tokens alone, and a request
// stays a request).
//
// Settle each wait at most once, with the Cost it waited for. A unit the
// key has no limit in, a negative cost, or a spent cost that no wait
// could have spent fails with the errors of [CostWaiter]'s WaitCost and
// changes nothing. SettleCost never blocks; the keys of [Limiter] and of
// distributed.Quota implement it.
type CostSettler interface {
	Settler
	SettleCost(ctx context.Context, spent, actual Cost) error
}

// SettleCost amends a wait of spent to actual: see [CostSettler].
func (b *bucket) SettleCost(ctx context.Context, spent, actual Cost) error {
	sn, an := spent.First(), actual.First()
	b.mu.Lock()
	if b.dead {
		b.mu.Unlock()
		return b.l.bucket(b.key).SettleCost(ctx, spent, actual)
	}
	if err := b.checkSettle(sn, an); err != nil {
		b.mu.Unlock()
		return err
	}
	d, err := b.settleUnits(spent.Units, actual.Units)
	if err != nil {
		b.mu.Unlock()
		return err
	}
	now := b.l.now()
	b.advanceLocked(now)
	moved := b.s.Settle(now, b.pacing, float64(sn), float64(an))
	if b.s.SettleLimits(now, d) {
		moved = true
	}
	if moved {
		b.notifyLocked()
	}
	b.mu.Unlock()
	return nil
}

// settleUnits returns, per further limit, actual − spent, in b.xcost
// (nil for a key without further limits, which then names no unit). It
// checks spent as a wait's cost (costOf) and actual's units as known and
// not negative. It requires b.mu.
func (b *bucket) settleUnits(spent, actual []UnitCost) ([]float64, error) {
	if len(spent) == 0 && len(actual) == 0 {
		return b.xcost0(), nil
	}
	d, err := b.costOf(spent)
	if err != nil {
		return nil, err
	}
	// A unit actual does not name stays as spent.
	for i, v := range b.xunits {
		if slices.ContainsFunc(actual, func(u UnitCost) bool { return u.Unit == v }) {
			d[i] = -d[i]
		} else {
			d[i] = 0
		}
	}
	for _, u := range actual {
		if u.N < 0 {
			return nil, fmt.Errorf("throttle: settle %d %s of %q: costs are never negative: %w", u.N, u.Unit, b.key, ErrInvalidLimit)
		}
		found := false
		for i, v := range b.xunits {
			if v == u.Unit {
				found = true
				d[i] += float64(u.N)
			}
		}
		if !found {
			return nil, fmt.Errorf("throttle: %q has no limit in unit %q: %w", b.key, u.Unit, ErrInvalidLimit)
		}
	}
	return d, nil
}

// SettleCost amends a wait on the Limiter's own quota (the key ""): see
// [CostSettler].
func (l *Limiter) SettleCost(ctx context.Context, spent, actual Cost) error {
	l.once.Do(l.init)
	return l.def.SettleCost(ctx, spent, actual)
}

// SettleCost amends a wait on the key: see [CostSettler].
func (k *Key) SettleCost(ctx context.Context, spent, actual Cost) error {
	return k.bucket().SettleCost(ctx, spent, actual)
}

var (
	_ CostSettler = (*bucket)(nil)
	_ CostSettler = (*Limiter)(nil)
	_ CostSettler = (*Key)(nil)
)
