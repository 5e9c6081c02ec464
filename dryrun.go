package throttle

import (
	"context"
	"errors"
	"time"
)

// probe asks w whether n units are available now without waiting for
// them, for a dry run: it waits with a context whose deadline is now (and
// which ends only when ctx does). A waiter that keeps the [Waiter]
// contract then either takes the units at once (the turn is now) or
// returns at once with a [DeadlineError] saying how long the wait would
// be, reserving nothing.
//
// It returns that delay; 0 with a nil error when the units were taken;
// 0 with the waiter's error when it cannot tell (a waiter that is not
// deadline-aware, or a wait that could never be served).
//
// With units (a request's cost in further units, [Transport].Units) and
// a [CostWaiter], it asks for them too, on every limit at once.
func probe(ctx context.Context, w Waiter, n int, units []UnitCost) (time.Duration, error) {
	var err error
	if cw, ok := w.(CostWaiter); ok && len(units) > 0 {
		err = cw.WaitCost(deadlineNow{ctx}, Cost{N: n, Units: units})
	} else {
		err = w.WaitN(deadlineNow{ctx}, n)
	}
	if err == nil || ctx.Err() != nil {
		return 0, err
	}
	var de *DeadlineError
	if errors.As(err, &de) && de.Delay > 0 {
		return de.Delay, nil
	}
	return 0, err
}

// deadlineNow is a context whose deadline is always the present moment
// but which ends only when its parent does: a waiter sees a deadline that
// every wait would pass, and fails the wait instead of sleeping, but an
// immediate turn is still taken. (A fixed deadline would be in the past by
// the time a waiter reads its clock, and *rate.Limiter would then refuse
// even an immediate turn.)
type deadlineNow struct{ context.Context }

func (deadlineNow) Deadline() (time.Time, bool) { return time.Now(), true }
