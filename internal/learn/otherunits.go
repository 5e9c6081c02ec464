package learn

import (
	"math"
	"slices"
	"time"

	"github.com/throttle-go/throttle/ratelimit"
)

// A server often states limits in several units at once: OpenAI, Groq and
// Anthropic count requests and tokens a minute, and a Transport that
// counts requests (CostUnit "", the default) cannot pace by the tokens
// limit, since it does not know what a request costs in tokens. Told
// nothing, it paced by the requests limit alone while the tokens one
// bound: every pause's end let the queued requests go together into a
// spent tokens bucket, a 429 each (one per success against a fake of
// OpenAI's API, 8% of the requests given up).
//
// So the Transport learns, per key (learned.go), what one of its units
// costs in each other unit a server counts. learn takes, from p's response, what the request it answered cost in
// p's unit: the fall of p's remaining since the last response, plus what
// the bucket refilled in between for a bucket that refills, within one
// window for a window, for a request of n of the Transport's units. The
// estimate (cost) is the median of the last otherSamples such costs, so
// that responses handled out of order (two requests' costs in one fall,
// none in the next) do not move it. With an estimate c, p is read as a
// policy of the Transport's unit (Limit/c, Remaining/c: policy), and
// paces the key as such a policy would: its declared pace, and a pause
// when it cannot pay for one more request, until it can.

// otherSamples is how many recent costs an estimate is the median of.
const otherSamples = 5

// SameUnit reports whether a policy's unit is the Transport's unit ("" in
// a policy is requests).
func SameUnit(policy, unit string) bool {
	return policy == unit || (policy == "" && unit == "requests")
}

// learn learns from p's response (see above), then remembers p.
func (s *policySeen) learn(p ratelimit.Policy, n float64, rejected bool, now time.Time) {
	remaining, limit := float64(p.Remaining), float64(p.Limit)
	var refill float64
	var end time.Time
	switch {
	case p.Refills && p.HasWindow && p.Window > 0:
		refill = limit / p.Window.Seconds()
	case p.Refills && p.HasReset && p.Reset > 0 && remaining < limit:
		refill = (limit - remaining) / p.Reset.Seconds() // the deficit refills by the reset
	case !p.Refills && p.HasReset:
		end = now.Add(p.Reset)
	}
	if !s.at.IsZero() && !rejected && now.After(s.at) {
		dt := now.Sub(s.at).Seconds()
		before, ok := s.remaining, false
		switch {
		case p.Refills && refill > 0 && s.refill > 0:
			// Not if the bucket may have been full in between: what it
			// refilled is then unknown.
			before += s.refill * dt
			ok = before < limit-1
		case !p.Refills && !s.end.IsZero() && !end.IsZero():
			// The same window: its end moved by less than a second
			// (whole-second resets) and remaining did not grow.
			d := end.Sub(s.end)
			ok = d > -time.Second && d < time.Second && remaining <= before
		}
		if spent := before - remaining; ok && spent > 0 && !math.IsInf(spent, 0) {
			if len(s.costs) == otherSamples {
				s.costs = s.costs[1:]
			}
			s.costs = append(s.costs, spent/n)
		}
	}
	s.at, s.remaining, s.limit, s.refill, s.end = now, remaining, limit, refill, end
}

// cost returns the median of the recent costs of one of the Transport's
// units in this one.
func (s *policySeen) cost() (float64, bool) {
	if len(s.costs) == 0 {
		return 0, false
	}
	c := slices.Clone(s.costs)
	slices.Sort(c)
	return c[len(c)/2], true
}

// policy returns p read in the Transport's unit at a cost of c of p's
// units each: whole units of the Transport's, as many as p pays for. A
// refilling bucket that cannot pay for one more is spent until it can
// (the time its refill takes to cover the difference), not until it is
// full.
func (s *policySeen) policy(p ratelimit.Policy, c float64, unit string) ratelimit.Policy {
	r := p
	r.Unit = unit
	r.Limit = int64(math.Min(math.Floor(float64(p.Limit)/c), math.MaxInt32))
	r.Remaining = int64(math.Min(math.Floor(float64(p.Remaining)/c), math.MaxInt32))
	if r.Remaining == 0 && p.Refills && s.refill > 0 {
		need := (c - float64(p.Remaining)) / s.refill
		r.Reset, r.HasReset = time.Duration(math.Ceil(need*1e9)), true
	}
	if r.Limit <= 0 {
		r.Limit = 1 // a request dearer than the whole limit: one at a time
	}
	return r
}
