// Package learn holds what a Transport learns of each key from its
// responses, beyond what one response says, and the rewrites of a
// response's reading that follow before the key's waiter is told of it:
//
//   - the cost of a request in the other units a server counts
//     (otherunits.go: tokens beside requests);
//   - the length of a window a server does not state (windowlen.go);
//   - the earliest instant a reset stated as an instant has passed by
//     (resetat.go);
//   - that a policy once said to hold more than its limit is a bucket of
//     at least that depth (policySeen.depth).
//
// What it decides is per Transport and per process: a fleet's processes
// each learn these from their own responses (the waiter they share is
// told the rewritten reading).
package learn

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/throttle-go/throttle/ratelimit"
)

// Keys is what a Transport learns of each key from its responses,
// beyond what one response says: what a request costs in the other units
// a server counts (otherunits.go), the length of a window a server does
// not state (windowlen.go), and when a window whose reset is stated as an
// instant has ended by (resetat.go). Read applies them to a response's
// Reading before the key's waiter is told of it.
//
// The zero value knows nothing; it is safe for concurrent use. Memory is
// bounded: at most learnedKeys keys are remembered, and past that an
// arbitrary one is forgotten (what it had learned is learned again
// from its next responses), and at most learnedPolicies policies a key.
type Keys struct {
	mu        sync.Mutex // protects keys and secondary
	keys      map[string][]policySeen
	secondary map[string]secondaryRun // secondary limits in a row, by key (secondary.go)
	anyDue    atomic.Bool             // secondary is not empty
	deep      atomic.Bool             // a policy deeper than its limit was seen (depth)
}

const (
	learnedKeys     = 4096
	learnedPolicies = 8
)

// policySeen is what a key's responses said of one of its policies (by
// name and unit).
type policySeen struct {
	name, unit string

	// For a policy of another unit (otherunits.go): the last response.
	at        time.Time // when it came
	remaining float64   // units left then
	limit     float64   // units per window
	refill    float64   // units a second the bucket refills; 0 for a window
	end       time.Time // a window's end; zero for a refilling bucket
	costs     []float64 // recent costs of one of the Transport's units, in this unit

	// For a policy that states no window (windowlen.go).
	first    time.Time     // the first response that gave a reset
	resetMax time.Duration // the longest reset given since

	// For a policy whose reset is an instant (resetat.go): the instant
	// last stated, and when it has passed by as its responses bound it.
	resetAt, resetBy time.Time

	// depth: the most units a bucket deeper than its limit was said to
	// hold ([ratelimit.Policy.Depth]); 0 if none was. A policy once seen
	// deeper is a bucket from then on, of at least that depth, whatever
	// its later responses say (a drained bucket's Remaining is below its
	// Limit).
	depth int64
}

// Read returns q as the key's waiter is to take it, after learning from
// it (a response at now to a request of n of the Transport's units, unit;
// rejected if it was a refusal): each policy that states no window has
// the one its resets showed, each reset stated as an instant is the
// earliest its responses bound it to, and each policy of another unit than unit
// that the key's estimate covers is added as a policy of unit. It
// returns q itself when there is nothing to add or change, and never
// changes q's own Policies.
func (o *Keys) Read(key string, q ratelimit.Reading, unit string, n int, rejected bool, now time.Time) ratelimit.Reading {
	if !slices.ContainsFunc(q.Policies, func(p ratelimit.Policy) bool {
		return unwindowed(p) || !p.ResetAt.IsZero() || (!SameUnit(p.Unit, unit) && p.HasLimit && p.HasRemaining && p.Limit > 0) ||
			p.Depth > 0 || (o.deep.Load() && p.HasLimit && p.HasRemaining)
	}) {
		return q
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.keys == nil {
		o.keys = make(map[string][]policySeen)
	}
	seen, ok := o.keys[key]
	if !ok && len(o.keys) >= learnedKeys {
		for k := range o.keys {
			delete(o.keys, k)
			break
		}
	}
	policies := q.Policies
	cloned := false
	for i, p := range q.Policies {
		j := slices.IndexFunc(seen, func(s policySeen) bool { return s.name == p.Name && s.unit == p.Unit })
		if j < 0 {
			if len(seen) >= learnedPolicies {
				continue
			}
			seen = append(seen, policySeen{name: p.Name, unit: p.Unit})
			j = len(seen) - 1
		}
		s := &seen[j]
		if p.Depth > 0 {
			d := p.Depth
			if SameUnit(p.Unit, unit) {
				d += int64(max(n, 1)) // the bucket held the request's units too
			}
			s.depth = max(s.depth, d)
			o.deep.Store(true)
		}
		if s.depth > 0 && (!p.Refills || p.Depth != s.depth) {
			if !cloned {
				policies, cloned = slices.Clone(policies), true
			}
			p.Refills, p.Depth = true, s.depth
			policies[i] = p
		}
		if unwindowed(p) {
			s.seeReset(p, now)
			if w, ok := s.window(now, p.Exhausted()); ok {
				if !cloned {
					policies, cloned = slices.Clone(policies), true
				}
				p.Window, p.HasWindow = w, true
				policies[i] = p
			}
		}
		if p.HasReset && !p.ResetAt.IsZero() {
			if r := s.resetBound(p, now); r < p.Reset {
				if !cloned {
					policies, cloned = slices.Clone(policies), true
				}
				p.Reset = r
				policies[i] = p
			}
		}
		if SameUnit(p.Unit, unit) || !p.HasLimit || !p.HasRemaining || p.Limit <= 0 {
			continue
		}
		s.learn(p, float64(max(n, 1)), rejected, now)
		if c, ok := s.cost(); ok {
			if !cloned {
				policies, cloned = slices.Clone(policies), true
			}
			policies = append(policies, s.policy(p, c, unit))
		}
	}
	o.keys[key] = seen
	q.Policies = policies
	return q
}
