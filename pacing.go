package throttle

import (
	"context"
	"math"
	"net/http"
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

	// Window: Remaining units may be spent until Reset from now, as the
	// most restrictive policy of the counted unit says; Size units per
	// window of length Window (0 if not said). Valid if HasWindow.
	Remaining float64
	Reset     time.Duration
	Size      float64
	Window    time.Duration
	HasWindow bool

	// Declared: the pace the server declares (a policy of Limit units per
	// window, as Limit/window and Burst), for a key with no configured
	// limit. Valid if HasDeclared.
	Limit       rate.Limit
	Burst       int
	HasDeclared bool
}

// Adapter is a Waiter that paces itself from what servers say: it honours
// pauses, spreads a quota that runs low over the time left to its reset,
// adopts a server's declared limit where none is configured, and slows
// down on bare rejections. [Limiter]'s per-key waiters implement it;
// Transport prefers it to [Pauser].
type Adapter interface {
	Adapt(ctx context.Context, f Feedback) error
}

// feedback reads one response into the Feedback for its quota's waiter,
// and into the retry delay the server asked for: wait, and whether the
// server said (said is false when the backoff decides).
//
// A Retry-After is about the quota on a 429 or 503 only; on a redirect or
// a success it is advice for that response alone (RFC 9110, 10.2.3), and
// there "0" means now. A spent quota's reset is about the quota on any
// response; "quota remains" on a rejection says nothing of when to retry.
func (t *Transport) feedback(resp *http.Response, q Quota, age time.Duration) (f Feedback, wait time.Duration, said bool) {
	f.Age = age
	status := resp.StatusCode
	rejected := status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable
	wait, known := q.Wait()
	switch {
	case !known:
	case q.HasRetryAfter:
		said = rejected
	default:
		said = wait > 0
	}
	if !said {
		wait = 0
	}
	if wait > 0 {
		f.Pause = min(wait, t.Retry.maxRetryAfter())
	}
	if rejected && f.Pause == 0 && !t.DisableAdaptive {
		f.Throttled = !known || status == http.StatusTooManyRequests
	}

	unit := t.CostUnit
	if unit == "" {
		unit = "requests"
	}
	best := math.Inf(1)
	for _, p := range q.Policies {
		if p.Unit != unit && !(p.Unit == "" && unit == "requests") {
			continue
		}
		// Windows are tracked when they are long enough for whole-second
		// resets to tell them apart: a per-second limit is a pace, which
		// the declared limit and the pauses keep. A window of unknown
		// length counts as long only when its reset is a second past
		// that more: resets read from whole-second epochs against a
		// whole-second Date are up to 2 s late, and a token bucket's
		// "time until full" is short.
		long := p.Reset >= minTrackedWindow+time.Second
		if p.Known&HasWindow != 0 {
			long = p.Window >= minTrackedWindow
		}
		if p.Known&(HasRemaining|HasReset) == HasRemaining|HasReset && p.Reset > 0 && long {
			// The most restrictive window: the least remaining per second
			// until its reset.
			if r := float64(p.Remaining) / p.Reset.Seconds(); r < best {
				best = r
				// A reset beyond MaxRetryAfter is waited for
				// MaxRetryAfter only (then a probe asks again), as a
				// Retry-After is.
				f.Remaining, f.Reset, f.HasWindow = float64(p.Remaining), min(p.Reset, t.Retry.maxRetryAfter()), true
				f.Size, f.Window = 0, 0
				if p.Known&HasLimit != 0 {
					f.Size = float64(p.Limit)
				}
				if p.Known&HasWindow != 0 {
					f.Window = p.Window
				}
			}
		}
		if !t.DisableDeclaredLimits && p.Known&(HasLimit|HasWindow) == HasLimit|HasWindow && p.Limit > 0 && p.Window > 0 {
			l := rate.Limit(float64(p.Limit) / p.Window.Seconds())
			// A declared pace slower than one unit per MaxRetryAfter
			// would make waits longer than the user allowed: ignored.
			if time.Duration(float64(time.Second)/float64(l)) > t.Retry.maxRetryAfter() {
				continue
			}
			if !f.HasDeclared || l < f.Limit {
				f.Limit, f.Burst, f.HasDeclared = l, int(min(p.Limit, math.MaxInt32)), true
			}
		}
	}
	return f, wait, said
}

// minTrackedWindow: shorter windows are not tracked (see feedback).
const minTrackedWindow = 2 * time.Second
