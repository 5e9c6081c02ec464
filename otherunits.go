package throttle

import (
	"math"
	"slices"
	"sync"
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
// otherUnits learns, per key, what one unit of the Transport's own costs
// in each other unit a server counts, from how that unit's remaining
// falls between two successive responses of the key: the fall (plus what
// the bucket refilled in between, for a bucket that refills; within one
// window for a window) is what the request of the later response spent,
// and its own cost is known. The estimate is the median of the last
// otherSamples such costs, so that responses handled out of order (two
// requests' costs in one fall, none in the next) do not move it. With an
// estimate c, each policy of another unit is read as one of the
// Transport's own (Limit/c, Remaining/c), and paces the key as such a
// policy would: its declared pace, and a pause when it cannot pay for one
// more request, until it can.
//
// The zero value learns from the first response; it is safe for
// concurrent use. Memory is bounded: at most otherKeys keys are
// remembered, and past that an arbitrary one is forgotten (its estimate
// is learned again from its next two responses).
type otherUnits struct {
	mu   sync.Mutex // protects keys
	keys map[string][]otherSeen
}

// otherKeys bounds the keys an otherUnits remembers; otherSamples is how
// many recent costs an estimate is the median of; otherPolicies bounds
// the policies of other units remembered per key.
const (
	otherKeys     = 4096
	otherSamples  = 5
	otherPolicies = 8
)

// otherSeen is what the last response said of one policy of another unit.
type otherSeen struct {
	name, unit string
	at         time.Time // when that response came
	remaining  float64   // units left then
	limit      float64   // units per window
	refill     float64   // units a second the bucket refills; 0 for a window
	end        time.Time // a window's end; zero for a refilling bucket
	costs      []float64 // recent costs of one of the Transport's units, in this unit
}

// read returns q with each policy of another unit than unit that key's
// estimate covers added as a policy of unit (q itself when there is
// none), after learning from q: a response at now to a request of n of
// the Transport's units, accepted unless rejected.
func (o *otherUnits) read(key string, q ratelimit.Reading, unit string, n int, rejected bool, now time.Time) ratelimit.Reading {
	var other bool
	for _, p := range q.Policies {
		if !sameUnit(p.Unit, unit) && p.HasLimit && p.HasRemaining && p.Limit > 0 {
			other = true
			break
		}
	}
	if !other {
		return q
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.keys == nil {
		o.keys = make(map[string][]otherSeen)
	}
	seen, ok := o.keys[key]
	if !ok && len(o.keys) >= otherKeys {
		for k := range o.keys {
			delete(o.keys, k)
			break
		}
	}
	var out []ratelimit.Policy
	for _, p := range q.Policies {
		if sameUnit(p.Unit, unit) || !p.HasLimit || !p.HasRemaining || p.Limit <= 0 {
			continue
		}
		i := slices.IndexFunc(seen, func(s otherSeen) bool { return s.name == p.Name && s.unit == p.Unit })
		if i < 0 {
			if len(seen) >= otherPolicies {
				continue
			}
			seen = append(seen, otherSeen{name: p.Name, unit: p.Unit})
			i = len(seen) - 1
		}
		s := &seen[i]
		s.learn(p, float64(max(n, 1)), rejected, now)
		if c, ok := s.cost(); ok {
			out = append(out, s.policy(p, c, unit))
		}
	}
	o.keys[key] = seen
	if len(out) == 0 {
		return q
	}
	q.Policies = append(slices.Clip(q.Policies), out...)
	return q
}

// sameUnit reports whether a policy's unit is the Transport's unit ("" in
// a policy is requests).
func sameUnit(policy, unit string) bool {
	return policy == unit || (policy == "" && unit == "requests")
}

// learn takes the cost of the request that p's response answered from
// the fall of p's remaining since the last response, then remembers p.
func (s *otherSeen) learn(p ratelimit.Policy, n float64, rejected bool, now time.Time) {
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
func (s *otherSeen) cost() (float64, bool) {
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
func (s *otherSeen) policy(p ratelimit.Policy, c float64, unit string) ratelimit.Policy {
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
