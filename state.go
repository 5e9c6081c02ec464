package throttle

import (
	"time"

	"golang.org/x/time/rate"
)

// State is a read-only view of one key's quota at one instant: what a
// wait would meet. Durations are from that instant (At), so that no clock
// other than the quota's own is involved (a shared quota's is the
// store's). Reading it changes nothing: it creates no state for a key
// that has none, extends no expiry, and queues nothing.
type State struct {
	// At is when the view was taken, by this process's clock.
	At time.Time

	// Tokens is what the first limit's bucket holds, less the units
	// queued, as x/time/rate's Limiter.Tokens (negative while waits are
	// queued beyond it); +Inf with no pace in force.
	Tokens float64

	// Remaining is how many units waits of one unit each could take at
	// once now: 0 while paused or while waits are queued, at most what
	// the bucket and the server's window allow; +Inf with no limit.
	Remaining float64

	// Next is how long until a wait of one unit would go, behind every
	// wait queued on any limit: 0 if at once.
	Next time.Duration

	// Paused is how long the pause in force has left; 0 if none.
	Paused time.Duration

	// Queued is the units of the waits queued (reservations included);
	// QueuedCritical and QueuedBackground are those of them in the
	// critical and the background class ([Priority]), the rest the
	// default class's and retries'.
	Queued                           int64
	QueuedCritical, QueuedBackground int64

	// Rate is the pace in force in units per second: the configured
	// rate, or the one a server declared (Declared), or the slow-down
	// after refusals (SlowedDown); rate.Inf for none. Burst is the
	// bucket's depth in units at that pace.
	Rate  rate.Limit
	Burst float64
	// SlowedDown reports a slow-down after bare refusals in force: a cut
	// of the pace, or a trim of it by the margin a strict server needs.
	SlowedDown bool
	// Declared reports that Rate is a server's declared pace (the key has
	// none configured).
	Declared bool

	// Window is the server's window in force, nil if none: Remaining
	// units may go until Reset from now (after the reset, probes go until
	// a response tells the next window).
	Window *ServerWindow

	// Limits are the key's further limits (every limit but the first
	// token bucket of the unit waits count), in the order configured.
	Limits []LimitState
}

// LimitState is one of a key's further limits as [State] shows it.
type LimitState struct {
	// Unit is the limit's unit ("" for the unit waits count); Window
	// reports a window (else a bucket).
	Unit   string
	Window bool
	// Remaining is how many of its units a wait could spend at once now,
	// once the waits queued have spent theirs (a bucket's level, what a
	// window has left; negative while queued waits owe more than it
	// holds).
	Remaining float64
}
