package distributed

import (
	"context"
	"fmt"

	"github.com/throttle-go/throttle"
)

// Settle implements [throttle.Settler] for the whole fleet: one script
// call amends the cost of a wait of the key that spent spent units to
// actual, by schedule.go's rule (a charge is a debt every process's next
// waits pay, of at most the burst: actual counts as at most spent +
// burst, the rest dropped; units given back move the queued turns of
// every process earlier, never filling the bucket past its burst), and
// publishes the move so that the waits sleeping in every process ask
// for their turns again. A settle that changes nothing (actual = spent)
// makes no call; a give-back to a key Redis keeps no state for (a full
// bucket) writes nothing.
//
// spent or actual negative, a limit that is not positive or a burst
// below 1 fail with [throttle.ErrInvalidLimit], spent more than the
// burst with [throttle.ErrCostExceedsBurst], before any call. The call
// has a context of its own bounded by Timeout, so that a request's
// context ending a moment later does not lose it. If Redis cannot
// answer, the settle is lost (a charge lost errs against the API's
// limit, units given back are lost) and Settle returns an error matching
// [ErrStoreUnavailable], whatever the FailMode: a FailLocal bucket is
// not amended.
func (w *keyWaiter) Settle(ctx context.Context, spent, actual int) error {
	_, err := w.settleN(ctx, spent, actual)
	return err
}

// settleN is Settle, and returns the units the script dropped of the
// charge (see settle); nil when no call was made.
func (w *keyWaiter) settleN(ctx context.Context, spent, actual int) (dropped []int64, err error) {
	if actual < 0 {
		return nil, fmt.Errorf("%w: settle %d units of %q as %d: costs are never negative", throttle.ErrInvalidLimit, spent, w.key, actual)
	}
	if err := w.q.check(spent); err != nil {
		return nil, err
	}
	if spent == actual {
		return nil, nil
	}
	dropped, err = w.settle(ctx, "settle", spent, actual)
	if err != nil {
		return nil, fmt.Errorf("settling %q: %w", w.key, unavailable(err))
	}
	return dropped, nil
}

// settle makes a settle's call (op settle, or msettle with its
// arguments) with a context of its own bounded by Timeout, and returns
// the units the script dropped of each charge (see bound in
// schedule_advance.lua): the first limit's, then, for msettle, each of
// Quota.Limits' in the order of xconf's spec; all 0 when none was.
func (w *keyWaiter) settle(ctx context.Context, op string, args ...any) (dropped []int64, err error) {
	reply, err := w.run(context.WithoutCancel(ctx), op, args...)
	if err != nil {
		return nil, err
	}
	want := 1
	if op == "msettle" {
		want += len(w.q.xconfig().units)
	}
	if len(reply) != want {
		return nil, fmt.Errorf("unexpected reply %v from the schedule script", reply)
	}
	return reply, nil
}

// Settle amends the cost of a wait on the quota's own bucket (the one
// For("") returns): see keyWaiter's Settle via For.
func (q *Quota) Settle(ctx context.Context, spent, actual int) error {
	return q.defaultWaiter().Settle(ctx, spent, actual)
}

var (
	_ throttle.Settler = (*keyWaiter)(nil)
	_ throttle.Settler = (*Quota)(nil)
)
