package ratelimit

import (
	"math"
	"time"
)

// Buckets that refill continuously. OpenAI, Groq and Anthropic limit
// requests and tokens with token buckets that refill all the time (a
// limit of 60 a minute frees one request a second), and their reset is
// the time until the bucket is full again, not the end of a window: a
// response saying "0 remain, reset in 9.98s" means the next unit frees
// long before 9.98 s. Their dialects mark their policies Refills, and
// tell the bucket's Window (how long it takes to refill from empty, so
// that Limit/Window is its refill rate) from the numbers themselves.
//
// The numbers bound the refill rate r: a bucket of Limit L holding R
// units (the header rounds down: the bucket holds R to R+1) is full after
// reset = (L − held)/r, so L/W = r lies in [(L−R−1)/reset, (L−R)/reset],
// and W in [L·reset/(L−R), L·reset/(L−R−1)], widened by the reset's
// resolution. These vendors publish their limits per minute or per day,
// and their buckets take that long to refill; a near-full bucket ("59 of
// 60, reset 167ms") allows a wide range. The window told is the standard
// length (second, minute, hour, day) in that range nearest to the point
// estimate L·reset/(L−R), and within a factor refillNear of it; when none
// is (a limit of another length, a near-full bucket whose numbers say
// little, numbers that do not add up, or a server that speaks the dialect
// but keeps fixed windows: 4 of 5 left with the window's end 0.5 s away
// points at 2.5 s), no window is told: Limit/Window is a rate the client
// paces at, and a guess the numbers do not support could pace it wrong.
// A bucket drained by steady traffic (R well below L) gives a point
// estimate within a factor (L−R)/(L−R−1) of its window.

// standardWindows are the lengths refilling buckets are published in.
var standardWindows = [...]time.Duration{time.Second, time.Minute, time.Hour, 24 * time.Hour}

// refillSlack widens the range the numbers allow, for rounding the
// resolution does not cover (a server rounding the reset up to its own
// clock's tick).
const refillSlack = 0.01

// refillNear: the window told is within this factor of the point
// estimate.
const refillNear = 2.5

// refills marks the policies from q.Policies[from:] as refilling buckets
// and tells the window of each that does not give one. res is the
// resolution of the dialect's resets (a millisecond for "167ms", a second
// for an RFC 3339 time without fraction).
func (q *Reading) refills(from int, res time.Duration) {
	for i := from; i < len(q.Policies); i++ {
		p := &q.Policies[i]
		p.Refills = true
		if p.HasWindow {
			continue
		}
		if w, ok := refillWindow(*p, res); ok {
			p.Window, p.HasWindow = w, true
		}
	}
}

// refillWindow returns the window of a refilling bucket p as its numbers
// allow (see above); ok is false when they allow no standard length.
func refillWindow(p Policy, res time.Duration) (time.Duration, bool) {
	if !p.HasLimit || !p.HasRemaining || !p.HasReset || p.Limit <= 0 || p.Remaining >= p.Limit || p.Reset <= 0 {
		return 0, false
	}
	l, spent := float64(p.Limit), float64(p.Limit-p.Remaining)
	reset := p.Reset.Seconds()
	lo := l * max(reset-res.Seconds(), 0) / spent * (1 - refillSlack)
	hi := math.Inf(1)
	if spent > 1 {
		hi = l * (reset + res.Seconds()) / (spent - 1) * (1 + refillSlack)
	}
	point := l * reset / spent
	best, found := time.Duration(0), false
	for _, w := range standardWindows {
		s := w.Seconds()
		if s < lo || s > hi || s > point*refillNear || s < point/refillNear {
			continue
		}
		if !found || math.Abs(math.Log(s/point)) < math.Abs(math.Log(best.Seconds()/point)) {
			best, found = w, true
		}
	}
	return best, found
}

// unitTime returns how long a refilling bucket p takes to free one unit
// (Window/Limit), at most its reset; ok is false when p does not say.
func (p Policy) unitTime() (time.Duration, bool) {
	if !p.Refills || !p.HasWindow || !p.HasLimit || p.Limit <= 0 {
		return 0, false
	}
	d := p.Window / time.Duration(p.Limit)
	if p.HasReset {
		d = min(d, p.Reset)
	}
	return d, true
}
