package throttle

import (
	"context"
	"errors"
	"time"
)

// probe asks q whether cost is available now without waiting for
// it, for a dry run: it waits with a context whose deadline is now (and
// which ends only when ctx does). A quota that keeps the [Quota]
// contract then either takes the units at once (the turn is now) or
// returns at once with a [DeadlineError] saying how long the wait would
// be, reserving nothing.
//
// It returns that delay; 0 with a nil error when the units were taken;
// 0 with the waiter's error when it cannot tell (a waiter that is not
// deadline-aware, or a wait that could never be served).
//
// It asks for the whole cost, on every limit at once.
func probe(ctx context.Context, q Quota, cost Cost) (time.Duration, error) {
	err := q.Wait(deadlineNow{ctx}, cost)
	if err == nil || ctx.Err() != nil {
		return 0, err
	}
	var de *DeadlineError
	if errors.As(err, &de) && de.Delay > 0 {
		return de.Delay, nil
	}
	return 0, err
}

type deadlineNow struct{ context.Context }

func (deadlineNow) Deadline() (time.Time, bool) { return time.Now(), true }
