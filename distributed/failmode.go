package distributed

import (
	"errors"
	"fmt"
)

// ErrStoreUnavailable is returned (wrapped, with the cause) by an
// operation of a [FailClosed] Limiter's key while Redis cannot be
// reached, and, whatever the FailMode, by a key's Pause (or Observe of a
// pause) that could not be written, and by a Settle or State Redis could
// not answer.
var ErrStoreUnavailable = errors.New("throttle/distributed: store unavailable")

// errBreakerOpen is the cause reported while the breaker keeps calls away
// from a store that just failed.
var errBreakerOpen = errors.New("breaker open after consecutive failures; probing every " + breakerCooldown.String())

// FailMode says what a wait does when Redis cannot answer in time (it is
// down, unreachable, slower than [Limiter.Timeout], or the breaker is open
// after recent failures). The zero value is [FailLocal]. A FailMode is a
// plain value, safe to copy and share.
type FailMode int

const (
	// FailLocal paces each process with an in-process limiter at its
	// share of every limit, so the fleet as a whole stays near the shared
	// limits while Redis is away and no request is refused: a token
	// bucket at its rate divided by [Limiter.Workers], with its whole
	// burst as capacity but starting with its share of it (rounded up, at
	// least one unit); a window at its Count divided by Workers (rounded
	// up), so that a cost above that share is refused
	// (ErrCostExceedsBurst) until Redis is back; all or none, as in
	// Redis. It is the zero value: it neither floods the API (like
	// FailOpen) nor turns a Redis outage into an outage of the program
	// (like FailClosed). Its accuracy rests on Workers being right.
	FailLocal FailMode = iota

	// FailOpen lets every wait through at once: availability first, the
	// API's own limit is the only guard while Redis is away.
	FailOpen

	// FailClosed fails every wait with an error matching
	// [ErrStoreUnavailable]: nothing is sent that the shared limits did
	// not allow.
	FailClosed
)

// String returns the mode's name, e.g. "FailLocal".
func (m FailMode) String() string {
	switch m {
	case FailLocal:
		return "FailLocal"
	case FailOpen:
		return "FailOpen"
	case FailClosed:
		return "FailClosed"
	}
	return fmt.Sprintf("FailMode(%d)", int(m))
}

// unavailable wraps cause as an ErrStoreUnavailable, unless it says
// nothing of the store's health (see answered).
func unavailable(cause error) error {
	if answered(cause) {
		return cause
	}
	return fmt.Errorf("%w: %w", ErrStoreUnavailable, cause)
}
