package throttle

import (
	"context"
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
// settleUnits returns, per further limit, actual − spent, in b.xcost
// (nil for a key without further limits, which then names no unit). It
// checks spent as a wait's cost (costOf) and actual's units as known and
// not negative. It requires b.mu.
// SettleCost amends a wait on the Limiter's own quota (the key ""): see
// [CostSettler].
// SettleCost amends a wait on the key: see [CostSettler].
func (k *Key) SettleCost(ctx context.Context, spent, actual Cost) error {
	return k.bucket().SettleCost(ctx, spent, actual)
}

var (
	_ CostSettler = (*bucket)(nil)
	_ CostSettler = (*Limiter)(nil)
	_ CostSettler = (*Key)(nil)
)
