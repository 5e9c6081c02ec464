package distributed

import (
	"context"
	"fmt"
	"time"

	"github.com/throttle-go/throttle"
)

// TryN implements [throttle.Trier]: one script call spends n units of the
// key's quota if a wait of n would go at once (the schedule's rules for a
// wait, in the same script), and otherwise changes nothing and returns
// how long from now a wait of n would go. It never sleeps; the call is
// bounded by Timeout.
//
// n = 0 returns true at once; n < 0, a limit that is not positive or a
// burst below 1 fail with [throttle.ErrInvalidLimit], n > burst with
// [throttle.ErrCostExceedsBurst], before any call. If Redis cannot
// answer, FailMode decides as for a wait: FailOpen spends (true),
// FailClosed returns an error matching [ErrStoreUnavailable], FailLocal
// tries this process's fallback bucket (and a pause this process knows).
// If ctx ends while the call is in flight, TryN returns ctx's error; a
// try that Redis had let go then stays spent (erring on the side of the
// API's limit).
func (w *keyWaiter) TryN(ctx context.Context, n int) (bool, time.Duration, error) {
	return w.tryX(ctx, n, nil, nil)
}

// tryX is TryN with a cost in the quota's further limits (xargs; nil:
// none): op mtry, whose rules are try's on every limit.
func (w *keyWaiter) tryX(ctx context.Context, n int, x []any, units []throttle.UnitCost) (bool, time.Duration, error) {
	q := w.q
	if err := q.check(n); err != nil {
		return false, 0, err
	}
	if n == 0 {
		return true, 0, nil
	}
	if err := ctx.Err(); err != nil {
		return false, 0, err
	}
	known, floor, hold := q.memo.args(w.rkey)
	// The arguments of a wait whose max wait is 0: see schedule.lua.
	op := "try"
	if x != nil {
		op = "mtry"
	}
	reply, err := w.run(ctx, op, append([]any{n, queueFirst, "0", known, floor, hold}, x...)...)
	if lerr := w.limitsError(err); lerr != nil {
		return false, 0, lerr
	}
	if err == nil && len(reply) != 6 {
		err = fmt.Errorf("unexpected reply %v from the schedule script", reply)
	}
	if err != nil {
		if errCaller(ctx, err) {
			return false, 0, err
		}
		return w.tryFail(ctx, n, units, err)
	}
	if reply[0] == 1 {
		return true, 0, nil
	}
	return false, usDuration(reply[1]), nil
}

// tryFail applies the FailMode to a try the store could not serve.
func (w *keyWaiter) tryFail(ctx context.Context, n int, units []throttle.UnitCost, cause error) (bool, time.Duration, error) {
	q := w.q
	if answered(cause) {
		return false, 0, cause // no store failure: no fail mode
	}
	q.fellBack(ctx, w.key, cause)
	switch q.FailMode {
	case FailOpen:
		return true, 0, nil
	case FailClosed:
		return false, 0, unavailable(cause)
	}
	now := q.clock()
	if nb := q.memo.notBefore(w.rkey); nb.After(now) {
		return false, nb.Sub(now), nil
	}
	if q.xconfig() != nil {
		return q.localX.try(ctx, q, w, n, units)
	}
	c := q.config()
	lim := q.local.get(w.key, c.limit, c.burst, max(1, q.Workers), now)
	r := lim.ReserveN(now, n)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d, nil
	}
	return true, 0, nil
}

// TryN spends n units of the quota's own bucket (the one For("")
// returns) now, or nothing: see [throttle.Trier] and For.
func (q *Quota) TryN(ctx context.Context, n int) (bool, time.Duration, error) {
	return q.defaultWaiter().TryN(ctx, n)
}

var _ throttle.Trier = (*keyWaiter)(nil)
