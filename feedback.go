package throttle

import (
	"time"

	"golang.org/x/time/rate"
)

// Feedback is what one response told of a key's quota, as [Transport]
// reads it for [Quota].Observe. Durations are from when the response
// arrived, so no clock but the quota's own is involved. What was not said
// is the zero value: a nil group, a zero duration.
type Feedback struct {
	// Verdict is what the server did with the request.
	Verdict Verdict
	// Spent is the units of the first limit the request spent; 0 means 1.
	Spent int
	// Age is how long ago the request was sent (its wait for quota
	// ended): a refusal of a request sent before the quota last slowed
	// down says nothing of the slower pace.
	Age time.Duration
	// Pause: nothing may be sent before Pause from now (Retry-After, or
	// a spent window's reset). Zero means no pause.
	Pause time.Duration
	// Paced: a spent window too short to track (a per-second limit) set
	// no Pause: the declared pace spreads its units.
	Paced bool

	// Window is the server's window, as the most restrictive policy of
	// the counted unit states it; nil if none.
	Window *ServerWindow
	// Available is the units the server would take now, as the policy of
	// the counted unit with the least remaining says (a bucket that
	// refills continuously; a window's rest): no more than that, less the
	// units in flight it has not counted yet, may go at once; nil if not
	// said.
	Available *float64
	// Declared is the pace the server declares, for a key with no
	// configured limit: a policy of n units per window is n/window units
	// a second, n at once; nil if none.
	Declared *Declared
}

// Verdict is what a server did with a request.
type Verdict int

const (
	// Answered: a response, or a failure, that says nothing of the quota
	// (a transport error): the request's units are no longer in flight.
	Answered Verdict = iota
	// Accepted: the server took the request.
	Accepted
	// Refused: the server refused the request and said when to come back
	// (Feedback.Pause).
	Refused
	// RefusedBare: the server refused the request (429, 503) without
	// saying for how long: the quota slows down.
	RefusedBare
)

// String returns the verdict's name.
func (v Verdict) String() string {
	switch v {
	case Answered:
		return "answered"
	case Accepted:
		return "accepted"
	case Refused:
		return "refused"
	case RefusedBare:
		return "refused-bare"
	}
	return "unknown"
}

// ServerWindow is a server's window: Remaining units may be spent until
// Reset from now, of Size units per window of Length (each 0 if not
// said).
type ServerWindow struct {
	Remaining float64
	Reset     time.Duration
	Size      float64
	Length    time.Duration
}

// Declared is a pace a server declares: Rate units a second, Burst at
// once.
type Declared struct {
	Rate  rate.Limit
	Burst int
}
