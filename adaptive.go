package throttle

import "math"

// adaptive slows a key down when a server rejects requests without saying
// for how long (a bare 429 or 503: Stripe, Twilio, AWS, nginx), and lets it
// speed up again gradually. It follows the AWS SDKs' adaptive retry mode:
// on a rejection the pace is cut to β times the rate the key was sending
// at; afterwards it regrows along a cubic curve (CUBIC, RFC 9438) that
// comes back to the pre-cut rate after K, lingers there, then probes beyond
// it, more slowly:
//
//	rate(t) = wMax + wMax·(1-β)·((t-K)/K)³    for t < K
//	rate(t) = wMax + wMax·(1-β)·((t-K)/P)³    for t ≥ K
//
// Unlike AWS's fixed C = 0.4, the curve is scaled by wMax, so the time to
// recover does not depend on the rate: K = 1 s whether the server allows 5
// or 5,000 requests a second, and the probe is 30% above wMax P = 3 s
// later. A quick return keeps a cut cheap (about 7% of a second's
// requests); a slow probe keeps the rejections that end each probe rare.
//
// A rejection of a request that reserved its turn before the last cut
// does not cut again: those were in flight under the old pace, as TCP cuts
// once per window, not once per lost packet.
//
// When the key has a limit (configured or declared by the server), a lone
// rejection is first taken for timer jitter against a strict server
// bucket: the key's schedule is shifted by a few intervals (slack against
// the server's phase) instead of cut. A second rejection within
// strikeWindow means the limit is wrong (a provider lowered it): then the
// pace is cut as above.
//
// All times are nanoseconds on the owning bucket's clock. adaptive is not
// safe for concurrent use; the bucket's mutex protects it.
type adaptive struct {
	active bool    // false: no cut in force; the key runs at its other limits
	wMax   float64 // units per second before the last cut
	cutAt  float64 // when the last cut happened
	last   float64 // when the last cut or shift happened
	moved  bool    // a cut or shift has happened: last is set
}

const (
	cubicBeta    = 0.7  // AWS SDKs' and CUBIC's multiplicative decrease
	strikeWindow = 10e9 // ns: a second rejection within it cuts
	shiftSlots   = 2    // intervals a lone rejection shifts the schedule
	cubicK       = 1e9  // ns to regrow to wMax
	cubicProbe   = 3e9  // ns past K to probe 30% beyond wMax
	adaptMinRate = 0.1  // units per second: never slower than one per 10 s
)

// rate returns the adaptive pace at now in units per second; +Inf when no
// cut is in force.
func (a *adaptive) rate(now float64) float64 {
	if !a.active {
		return math.Inf(1)
	}
	x := (now - a.cutAt - cubicK) / cubicK
	if x > 0 {
		x *= cubicK / cubicProbe
	}
	return max(a.wMax+a.wMax*(1-cubicBeta)*x*x*x, adaptMinRate)
}

// interval returns the adaptive pace at now as nanoseconds per unit, 0
// when there is none, and ends the adaptation once the curve has grown
// past ceiling (the configured or declared rate; +Inf if none) and far
// past the rate it was cut from.
func (a *adaptive) interval(now, ceiling float64) float64 {
	if !a.active {
		return 0
	}
	r := a.rate(now)
	if r >= ceiling || r >= 10*a.wMax {
		a.active = false
		return 0
	}
	return 1e9 / r
}

// reject records a rejection at now of a request that reserved its turn
// at reservedAt, by a key sending at measured units per second (its pace
// over the last second) whose limit is ceiling units per second (+Inf if
// none). It returns what to do: nothing (the request reserved before the
// last change), shift the schedule, or cut (the pace is already cut).
func (a *adaptive) reject(now, reservedAt, measured, ceiling float64) rejection {
	if a.moved && reservedAt < a.last {
		return rejectIgnore
	}
	if !math.IsInf(ceiling, 1) && !a.active && (!a.moved || now-a.last > strikeWindow) {
		a.last, a.moved = now, true
		return rejectShift
	}
	cur := min(a.rate(now), ceiling)
	if measured > 0 {
		cur = min(cur, measured)
	}
	if math.IsInf(cur, 1) {
		cur = 1 // no measure at all: start from one a second
	}
	a.active = true
	a.wMax = max(cur, adaptMinRate/cubicBeta)
	a.cutAt, a.last, a.moved = now, now, true
	return rejectCut
}

type rejection int

const (
	rejectIgnore rejection = iota
	rejectShift
	rejectCut
)
