package distributed

import (
	"context"
	"fmt"
	"strconv"

	"github.com/throttle-go/throttle"
)

// Settle amends a wait that spent spent to what it really cost, actual,
// for the whole fleet: see [throttle.Quota]. One script call (op settle,
// or msettle for a Limiter with further limits) amends the key's state
// by the engine's rules: per limit, a charge is a debt every process's
// next waits pay, of at most what the limit holds at once beyond spent
// (the rest is dropped, and reported as an [throttle.EventClamp] to
// OnEvent and to the function of ctx, [throttle.WithEvents]); units
// given back move the queued turns of every process earlier, never
// filling a bucket past its burst; on a window, a charge counts in the
// window the settle falls in (Redis's clock). The script publishes the
// move, so that the waits sleeping in every process ask for their turns
// again. actual is the whole cost: its N, and each unit it names (a
// unit it does not name stays as spent). A settle that changes nothing
// makes no call; a give-back to a key Redis keeps no state for (a full
// bucket) writes nothing.
//
// A spent cost that no wait could have spent, or a negative or unknown
// unit in actual, fails as a wait's cost does ([throttle.ErrInvalidLimit],
// [throttle.ErrCostExceedsBurst]), before any call. The call has a
// context of its own bounded by Timeout, so that a request's context
// ending a moment later does not lose it. If Redis cannot answer, the
// settle is lost (a charge lost errs against the API's limit, units
// given back are lost) and Settle returns an error matching
// [ErrStoreUnavailable], whatever the FailMode: a FailLocal fallback is
// not amended.
func (w *keyWaiter) Settle(ctx context.Context, spent, actual throttle.Cost) error {
	_, err := w.settle(ctx, spent, actual)
	return err
}

// settle is Settle, and returns the units the script dropped of each
// charge: the first limit's, then each further limit's in the order of
// xconf's spec; nil when no call was made.
func (w *keyWaiter) settle(ctx context.Context, spent, actual throttle.Cost) (dropped []int64, err error) {
	q := w.q
	sn, an := spent.N, actual.N
	if sn < 0 || an < 0 {
		return nil, fmt.Errorf("%w: settle %d units of %q as %d: costs are never negative", throttle.ErrInvalidLimit, sn, w.key, an)
	}
	if err := q.check(sn); err != nil {
		return nil, err
	}
	s, err := q.costOf(spent)
	if err != nil {
		return nil, err
	}
	x := q.xconfig()
	if x == nil {
		for u := range actual.Units {
			return nil, fmt.Errorf("%w: limiter %q has no limit in unit %q", throttle.ErrInvalidLimit, q.name, u)
		}
		if sn == an {
			return nil, nil
		}
		return w.settleCall(ctx, "settle", settleArgs{Spent: sn, Actual: an})
	}
	// actual's units: known, not negative, of any size (a charge the
	// script bounds).
	for u, n := range actual.Units {
		if n < 0 {
			return nil, fmt.Errorf("%w: settle %d %s of %q: costs are never negative", throttle.ErrInvalidLimit, n, u, w.key)
		}
		if !x.has(u) {
			return nil, fmt.Errorf("%w: limiter %q has no limit in unit %q", throttle.ErrInvalidLimit, q.name, u)
		}
	}
	change := sn != an
	a := settleArgs{Spent: sn, Actual: an, Xspec: x.spec, Xcost: make([]any, 0, len(x.units))}
	for i, u := range x.units {
		d := 0.0 // a unit actual does not name stays as spent
		switch n, named := actual.Units[u]; {
		case u == "":
			d = float64(an) - s[i]
		case named:
			d = float64(n) - s[i]
		}
		a.Xcost = append(a.Xcost, strconv.FormatFloat(d, 'g', -1, 64))
		change = change || d != 0
	}
	if !change {
		return nil, nil
	}
	return w.settleCall(ctx, "msettle", a)
}

// settleCall makes a settle's call (op settle, or msettle with its
// arguments) with a context of its own bounded by Timeout, reports each
// charge the script dropped (see bound in schedule_advance.lua) as an
// EventClamp, and returns them.
func (w *keyWaiter) settleCall(ctx context.Context, op string, a settleArgs) ([]int64, error) {
	q := w.q
	reply, err := w.run(context.WithoutCancel(ctx), op, a.append(nil)...)
	if lerr := w.limitsError(err); lerr != nil {
		return nil, lerr
	}
	want := rsettleXdropped
	if op == "msettle" {
		want += len(q.xconfig().units)
	}
	if err == nil && len(reply) != want {
		err = fmt.Errorf("unexpected reply %v from the schedule script", reply)
	}
	if err != nil {
		return nil, fmt.Errorf("settling %q: %w", w.key, unavailable(err))
	}
	for i, d := range reply {
		if d <= 0 {
			continue
		}
		e := throttle.Event{Kind: throttle.EventClamp, Key: w.key, Units: float64(d)}
		if i > 0 {
			e.Unit = q.xconfig().units[i-1]
		}
		q.emitCall(ctx, e)
	}
	return reply, nil
}
