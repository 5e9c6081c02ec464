package throttle

import (
	"context"
)

// Settler is a Waiter whose costs can be settled after the fact: a wait
// spends an estimate (an LLM call's tokens, before the call), and the
// real cost, known from the response (its usage), is settled later.
// Settle(ctx, spent, actual) amends a wait that spent spent units to
// actual: less used gives spent − actual units back, so that the waits
// queued behind go that much earlier; more used charges actual − spent
// more units, a debt the next waits pay (they go that much later).
// Either way the queued turns move at once, and their sleepers learn it.
// Units given back never make the bucket hold more than its burst (a
// bucket that has refilled meanwhile keeps only its burst): settling
// cannot let more through at once than the bucket allows. Units given
// back count when they are settled, not when their wait went: if waits
// emptied the bucket meanwhile, they go to the next waits even though
// the bucket had refilled over them.
//
// Settle each wait at most once, with the spent of that wait: the waiter
// keeps no receipt, so it trusts spent (a [Transport] settles each
// response once; see [SettleResponse]). spent or actual negative fails
// with [ErrInvalidLimit], spent more than the burst (no wait could have
// spent it) with [ErrCostExceedsBurst]; neither changes anything. A key
// with no pace in force has nothing to amend. Settle never blocks; the
// keys of [Limiter] and of distributed.Quota implement it (the latter in
// one script call, bounded by its Timeout).
type Settler interface {
	Settle(ctx context.Context, spent, actual int) error
}

// Settle amends the cost of a wait of the key that spent spent units to
// actual: see [Settler]. It never blocks, and fails only for a cost the
// key could not have spent.
// checkSettle validates a settle of spent units to actual. It requires
// b.mu.
// Settle amends the cost of a wait on the Limiter's own quota (the key
// ""): see [Settler].
// Settle amends the cost of a wait on the key that spent spent units to
// actual: see [Settler].
func (k *Key) Settle(ctx context.Context, spent, actual int) error {
	return k.bucket().Settle(ctx, spent, actual)
}

var (
	_ Settler = (*bucket)(nil)
	_ Settler = (*Limiter)(nil)
	_ Settler = (*Key)(nil)
)
