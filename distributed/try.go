package distributed

import (
	"context"
	"fmt"
	"time"

	"github.com/throttle-go/throttle"
)

// Try spends cost now, or nothing: see [throttle.Quota]. One script call
// spends it if a wait for it would go at once (the schedule's rules for a
// wait, in the same script), and otherwise changes nothing and returns
// how long from now a wait for it would go. It never sleeps; the call is
// bounded by Timeout.
//
// A cost of no unit of the first limit (N 0) returns true at once and
// spends nothing, as Wait's; a cost no wait can serve fails as Wait's
// does, before any call. If Redis cannot answer, FailMode
// decides as for a wait: FailOpen spends (true), FailClosed returns an
// error matching [ErrStoreUnavailable], FailLocal tries this process's
// fallback (and a pause this process knows). If ctx ends while the call
// is in flight, Try returns ctx's error; a try that Redis had let go
// then stays spent (erring on the side of the API's limit).
func (w *keyWaiter) Try(ctx context.Context, cost ...throttle.Cost) (bool, time.Duration, error) {
	return w.try(ctx, sum(cost))
}

// Allow spends cost now, or nothing: Try without a context or its delay.
func (w *keyWaiter) Allow(cost ...throttle.Cost) bool {
	ok, _, _ := w.try(context.Background(), sum(cost))
	return ok
}

// AllowN spends n units of the first limit now, or nothing.
func (w *keyWaiter) AllowN(n int) bool {
	ok, _, _ := w.try(context.Background(), throttle.Cost{N: n})
	return ok
}

// try is Try of c (Retry aside: a try takes no place in a queue): op
// try, or mtry for a Limiter with further limits, whose rules are try's
// on every limit.
func (w *keyWaiter) try(ctx context.Context, c throttle.Cost) (bool, time.Duration, error) {
	q := w.q
	n := c.N
	if err := q.check(n); err != nil {
		return false, 0, err
	}
	cost, err := q.costOf(c)
	if err != nil {
		return false, 0, err
	}
	if n == 0 {
		if anyUnits(c) {
			return false, 0, fmt.Errorf("%w: a cost of no unit of the first limit (N 0) names units %v: a wait is at least one unit of its first limit", throttle.ErrInvalidLimit, c.Units)
		}
		return true, 0, nil // nothing to spend: see wait
	}
	x := q.xargs(cost)
	if err := ctx.Err(); err != nil {
		return false, 0, err
	}
	known, floor, hold := q.memo.args(w.rkey)
	// The arguments of a wait whose max wait is 0: see schedule.lua.
	op := "try"
	if x != nil {
		op = "mtry"
	}
	a := waitArgs{N: n, Queue: q.queueOf(ctx, throttle.Cost{N: n}), Maxwait: "0", KnownID: known, KnownFloor: floor, KnownHold: hold}
	if x != nil {
		a.Xspec, a.Xcost = x[0], x[1:]
	}
	reply, err := w.run(ctx, op, a.append(nil)...)
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
		return w.tryFail(ctx, c, err)
	}
	if reply[rwaitStatus] == statusOK {
		return true, 0, nil
	}
	return false, usDuration(reply[rwaitWait]), nil
}

// tryFail applies the FailMode to a try of c the store could not serve.
func (w *keyWaiter) tryFail(ctx context.Context, c throttle.Cost, cause error) (bool, time.Duration, error) {
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
		return q.localX.try(ctx, q, w, c)
	}
	conf := q.config()
	lim := q.local.get(w.key, conf.limit, conf.burst, max(1, q.Workers), now)
	r := lim.ReserveN(now, c.N)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d, nil
	}
	return true, 0, nil
}
