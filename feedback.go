package throttle

import (
	"context"
	"time"

	"golang.org/x/time/rate"
)

// Feedback is what one response told the client about a quota, as
// [Transport] reads it for the quota's waiter. Durations are relative to
// when the response arrived, so no clock but the waiter's own is involved.
type Feedback struct {
	// Cost is the units the request spent; zero means 1.
	Cost int

	// Age is how long ago the request was sent (its wait for quota
	// ended): a rejection of a request sent before the waiter last slowed
	// down says nothing about the slower pace.
	Age time.Duration

	// Pause: nothing may be sent before Pause from now (Retry-After, or an
	// exhausted quota's reset). Zero means no pause.
	Pause time.Duration

	// Throttled: the server rejected the request (429 or 503) without
	// saying for how long. The waiter should slow down.
	Throttled bool

	// Refused: the server refused the request (429 or 503), whether or
	// not it said for how long. A refusal with a Pause under a known
	// limit trims the key's pace a little, as a bare one does (see
	// [Limiter]'s strict servers), so that a server bucket left with no
	// slack gains some after the pause.
	Refused bool

	// Accepted: the server took the request (a response that is not a
	// refusal). A unit of a budget the key learned from refusals, sent
	// past its window's end, starts the next window (see [Limiter]).
	Accepted bool

	// The window: Remaining units may be spent until Reset from now, as
	// the most restrictive policy of the counted unit says; Size units per
	// window of length Window (each 0 if not said). Valid if HasRemaining.
	Remaining    float64
	Reset        time.Duration
	Size         float64
	Window       time.Duration
	HasRemaining bool

	// Available: the units the server would take now, as the policy of
	// the counted unit with the least remaining says (a bucket that
	// refills continuously, OpenAI's or Anthropic's; a sliding window's
	// count; a fixed window's rest). No more than that, less the units in
	// flight that it has not counted yet, may go at once; the key's bucket
	// refills from there at the pace in force. Valid if HasAvailable.
	Available    float64
	HasAvailable bool

	// Paced: a spent window too short to track (a per-second limit) did
	// not set Pause: the declared pace spreads its units (see
	// Transport.DisableDeclaredLimits), for a waiter that follows it.
	Paced bool

	// Declared: the pace the server declares, for a key with no
	// configured limit: a policy of n units per window is DeclaredRate
	// n/window (units per second) and DeclaredBurst n (units). Valid if
	// HasDeclared.
	DeclaredRate  rate.Limit
	DeclaredBurst int
	HasDeclared   bool
}

// Adapter is a Waiter that paces itself from what servers say: it honours
// pauses, spreads a quota that runs low over the time left to its reset,
// adopts a server's declared limit where none is configured, and slows
// down on bare rejections. [Limiter]'s per-key waiters implement it;
// Transport prefers it to [Pauser].
type Adapter interface {
	Adapt(ctx context.Context, f Feedback) error
}

// Adapted is what an [AdaptReporter] did with a [Feedback].
type Adapted struct {
	// Pause is the pause it set for the Feedback's Pause: that, or less
	// where it knows the quota frees sooner (a budget it learned from
	// refusals ends a refused probe's pause at its window's end, not at
	// the whole-second Retry-After); 0 when the Feedback had none.
	Pause time.Duration
	// Timing: it took a bare refusal for a strict server's timing, not
	// its budget, and left its pace as it was (a [Limiter]'s key one unit
	// deep): the request may go again at its next turn, without a backoff.
	Timing bool
}

// An AdaptReporter is an [Adapter] that tells what it did with each
// Feedback. [Transport] prefers it: its EventPause then reports the pause
// the waiter set, and a refusal taken for timing is retried at the next
// turn. [Limiter]'s per-key waiters and distributed.Quota's implement it.
type AdaptReporter interface {
	Adapter
	// AdaptReport is Adapt, and returns what it did.
	AdaptReport(ctx context.Context, f Feedback) (Adapted, error)
}
