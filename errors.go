package throttle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/throttle-go/throttle/internal/local"
)

// ErrWouldExceedDeadline is returned (wrapped) by a wait whose turn comes
// after its context's deadline. Such a wait returns at once and reserves
// nothing. The error also matches [context.DeadlineExceeded] under
// [errors.Is], and its Timeout method reports true, so an [net/http.Client]
// caller sees a timeout.
var ErrWouldExceedDeadline error = &DeadlineError{}

// ErrCostExceedsBurst is returned (wrapped) by a wait for more units than the
// quota's burst: such a wait could never be served.
var ErrCostExceedsBurst = errors.New("throttle: cost exceeds burst")

// ErrInvalidLimit is returned (wrapped) by a wait on a quota configured with
// a negative limit or burst, or a negative cost.
var ErrInvalidLimit = errors.New("throttle: invalid limit")

// ErrQueueFull is returned (wrapped, with the key, the wait's units, the
// units queued and the bound) by a wait or reservation that would have
// queued past its waiter's MaxQueued ([Limiter.MaxQueued]; for a shared
// quota, the distributed package's). Such a wait returns at once and
// spends nothing.
var ErrQueueFull = errors.New("throttle: queue full")

// queueFull returns the error of a wait of n units on key refused with
// queued units queued and at most max allowed: it matches ErrQueueFull.
func queueFull(key string, n, queued, max int64) error {
	return fmt.Errorf("throttle: wait for %d units of %q would queue past MaxQueued %d (%d queued): %w", n, key, max, queued, ErrQueueFull)
}

// DeadlineError reports a wait that would end after its context's deadline.
// It matches [ErrWouldExceedDeadline] and [context.DeadlineExceeded] under
// [errors.Is].
type DeadlineError struct {
	Key   string        // the quota's key; "" for a single-quota waiter
	Delay time.Duration // how long the wait would have been
}

func (e *DeadlineError) Error() string {
	if e.Delay == 0 && e.Key == "" {
		return "throttle: wait would exceed context deadline"
	}
	if e.Key == "" {
		return fmt.Sprintf("throttle: wait of %v would exceed context deadline", e.Delay)
	}
	return fmt.Sprintf("throttle: wait of %v for %q would exceed context deadline", e.Delay, e.Key)
}

// Is reports whether target is ErrWouldExceedDeadline or
// context.DeadlineExceeded.
func (e *DeadlineError) Is(target error) bool {
	return target == ErrWouldExceedDeadline || target == context.DeadlineExceeded
}

// Timeout reports true: the wait failed because of a time limit.
func (e *DeadlineError) Timeout() bool { return true }

// Temporary reports true, as [context.DeadlineExceeded] does.
func (e *DeadlineError) Temporary() bool { return true }

// keyErr converts an error of package local for key to the package's
// own.
func keyErr(key string, err error) error {
	if err == nil {
		return nil // before de and le, which escape: a wait that went allocates nothing
	}
	var de *local.DeadlineError
	var le *local.Error
	var qe *local.QueueFullError
	switch {
	case errors.As(err, &de):
		return &DeadlineError{Key: key, Delay: de.Delay}
	case errors.As(err, &qe):
		return queueFull(key, qe.N, qe.Queued, qe.Max)
	case errors.As(err, &le):
		sentinel := ErrInvalidLimit
		if le.Err == local.ErrCost {
			sentinel = ErrCostExceedsBurst
		}
		return fmt.Errorf("throttle: %s: %w", le.Msg, sentinel)
	}
	return err
}
