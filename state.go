package throttle

import (
	"context"
	"time"

	"golang.org/x/time/rate"
)

// State is a read-only view of one key's quota at one instant: what a
// wait would meet. Durations are from that instant (At), so that no
// clock other than the waiter's own is involved (a shared quota's is the
// store's).
type State struct {
	// At is when the view was taken, by this process's clock.
	At time.Time

	// Tokens is what the bucket holds, less the units queued, as
	// x/time/rate's Limiter.Tokens (negative while waits are queued
	// beyond it); +Inf with no pace in force.
	Tokens float64

	// Remaining is how many units waits of one unit each could take at
	// once now: 0 while paused or while waits are queued, at most what
	// the bucket and the server's window allow; +Inf with no limit.
	Remaining float64

	// Next is how long until a wait of one unit would go: 0 if at once.
	Next time.Duration

	// Paused is how long the pause in force has left; 0 if none.
	Paused time.Duration

	// Queued is the units of the waits queued (reservations included).
	Queued int64

	// Limit is the pace in force in units per second: the configured
	// rate, or the one a server declared (Declared), or the slow-down
	// after rejections (Cut); rate.Inf for none. Burst is the bucket's
	// depth in units at that pace.
	Limit rate.Limit
	Burst float64
	// Cut reports a slow-down after bare rejections in force: a cut, or a
	// trim of the limit by the margin a strict server needs.
	Cut bool
	// Declared reports that Limit is a server's declared limit (the key
	// has none configured).
	Declared bool

	// Window reports a server's window in force: WindowLeft units may go
	// until WindowReset from now (after the reset, probes go until a
	// response tells the next window).
	Window      bool
	WindowLeft  float64
	WindowReset time.Duration
}

// Inspector is a Waiter that shows a key's state. State reads it and
// changes nothing: it creates no state for a key that has none, extends
// no expiry, and queues nothing. The keys of [Limiter] and of
// distributed.Quota implement it.
type Inspector interface {
	State(ctx context.Context) (State, error)
}

// State returns the key's state now: see [State]. It never fails for a
// Limiter's key.
// state converts the schedule's view at now to a State taken at at. It
// requires b.mu, after advance.
// State returns the state of key's quota now, without creating the key:
// a key the Limiter does not remember (never seen, or forgotten) shows
// the state of a new key. The key "" is the Limiter's own quota (WaitN on
// the Limiter).

// LimitState is one of a key's further limits ([Limiter.Limits]) as
// [Limiter.LimitStates] shows it. (The key's [State] is its first
// limit's, but for Next, which counts every limit.)
type LimitState struct {
	// Unit is the limit's unit; Window reports a window (else a bucket).
	Unit   string
	Window bool
	// Remaining is how many of its units a wait could spend at once now,
	// once the waits queued have spent theirs (a bucket's level, what a
	// window has left; negative while queued waits owe more than it
	// holds): x/time/rate's Tokens for this limit.
	Remaining float64
}
