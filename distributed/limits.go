package distributed

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/internal/schedule"
	"golang.org/x/time/rate"
)

// A Limiter's limits, as [throttle.Limiter] takes them: the first token
// bucket of the unit waits count (Unit "") is the script's configured
// interval and burst (the engine's first limit); every other limit is a
// further limit, kept in the key's one hash (one Cluster slot) and spent
// all or none by one EVALSHA per wait (op mwait), the turn the latest
// among the limits, FIFO across the fleet. A further limit of Unit ""
// costs a Cost's N, one of another unit the units a Cost names. A wait
// that goes at once on a key with nothing queued takes mwait's fast path
// (the limits kept in the core: one field read and written) or its
// shortcut, any other the general path. A key with further limits takes
// no leased turns.

// limitSet is a Limiter's limits split as the script takes them.
type limitSet struct {
	rate  rate.Limit // the first bucket's; rate.Inf: none
	burst int        // the first bucket's; 1 without one
	// further are the further limits, each a bucket or a window alone
	// (a Limit with both a Rate and a Per is two), in the order given.
	further []throttle.Limit
	err     error // a limit no wait can use (matching ErrInvalidLimit)
}

// limitSet splits q's limits by [throttle.Limiter]'s rules: the first
// token bucket of Unit "" (rate.Inf is no bucket; Burst 0 is 1) is the
// first limit, every other bucket and every window a further limit.
func (q *Limiter) limitSet() limitSet {
	s := limitSet{rate: rate.Inf, burst: 1}
	first := true
	for i, l := range q.limits {
		if err := checkLimit(l); err != nil {
			return limitSet{rate: rate.Inf, burst: 1, err: fmt.Errorf("limiter %q, limit %d: %w", q.name, i, err)}
		}
		if (l.Rate != 0 || l.Burst != 0) && l.Rate != rate.Inf {
			if first && l.Unit == "" {
				s.rate, s.burst, first = l.Rate, max(l.Burst, 1), false
			} else {
				s.further = append(s.further, throttle.Limit{Unit: l.Unit, Rate: l.Rate, Burst: l.Burst})
			}
		}
		if l.Per != 0 || l.Count != 0 {
			s.further = append(s.further, throttle.Limit{Unit: l.Unit, Count: l.Count, Per: l.Per, Kind: l.Kind})
		}
	}
	return s
}

// checkLimit returns an error for a limit no wait can use, by
// [throttle.Limit]'s rules.
func checkLimit(l throttle.Limit) error {
	window := l.Per != 0 || l.Count != 0
	switch {
	case l.Rate < 0 || l.Burst < 0 || math.IsNaN(float64(l.Rate)):
		return fmt.Errorf("%w: limit %v has rate %v, burst %d: give a rate ≥ 0 (rate.Inf: none) and a burst ≥ 0", throttle.ErrInvalidLimit, l, l.Rate, l.Burst)
	case window && (l.Per <= 0 || l.Count < 1):
		return fmt.Errorf("%w: limit %v has a window of %d per %v: give a count ≥ 1 and a period > 0", throttle.ErrInvalidLimit, l, l.Count, l.Per)
	case window && (l.Kind < throttle.Fixed || l.Kind > throttle.FromFirstUse):
		return fmt.Errorf("%w: limit %v has window kind %v", throttle.ErrInvalidLimit, l, l.Kind)
	case window && l.Kind == throttle.SlidingLog && l.Count > throttle.MaxLogCount:
		return fmt.Errorf("%w: limit %v is a sliding log of %d per %v, more than MaxLogCount (%d) times a key keeps: use Sliding for counts this large",
			throttle.ErrInvalidLimit, l, l.Count, l.Per, throttle.MaxLogCount)
	}
	return nil
}

// xconf is the further limits as the script takes them.
type xconf struct {
	// spec: "Version|" then a limit each, comma-separated: "b:interval
	// µs/burst" a bucket, "f:length µs/count" a fixed window, "s:…" a
	// sliding one, "l:…" a sliding log, "u:…" a fixed window aligned to
	// first use.
	spec   string
	limits []throttle.Limit // each limit, a bucket or a window alone
	units  []string         // their units ("": the unit waits count)
	most   []float64        // the largest cost of each
	window []bool           // whether each is a window (else a bucket)
}

// xconfig returns q's further limits as the script takes them, nil if
// none (or if the limits are invalid: config says so).
func (q *Limiter) xconfig() *xconf {
	q.xOnce.Do(func() {
		s := q.limitSet()
		if s.err != nil || len(s.further) == 0 {
			return
		}
		x := &xconf{limits: s.further}
		spec := make([]string, len(s.further))
		for i, l := range s.further {
			most := float64(l.Count)
			if l.Per == 0 {
				// A bucket; Rate 0 never refills (one unit per 3e233
				// years, finite as in the Limiter).
				most = float64(max(l.Burst, 1))
				iv := min(1e6/float64(l.Rate), neverUs)
				spec[i] = "b:" + strconv.FormatFloat(iv, 'g', -1, 64) + "/" + strconv.Itoa(int(most))
			} else {
				kind := "f:"
				switch l.Kind {
				case throttle.Sliding:
					kind = "s:"
				case throttle.SlidingLog:
					kind = "l:"
				case throttle.FromFirstUse:
					kind = "u:"
				}
				spec[i] = kind + strconv.FormatInt(max(l.Per.Microseconds(), 1), 10) + "/" + strconv.Itoa(l.Count)
			}
			x.units = append(x.units, l.Unit)
			x.most = append(x.most, most)
			x.window = append(x.window, l.Per != 0)
		}
		x.spec = strconv.Itoa(q.Version) + "|" + strings.Join(spec, ",")
		q.x = x
	})
	return q.x
}

// sum adds costs up: none is one unit of the first limit, as
// [throttle.Quota] takes them.
func sum(cs []throttle.Cost) throttle.Cost {
	switch len(cs) {
	case 0:
		return throttle.Cost{N: 1}
	case 1:
		return cs[0]
	}
	var t throttle.Cost
	for _, c := range cs {
		t.N += c.N
		t.Retry = t.Retry || c.Retry
		for u, v := range c.Units {
			if t.Units == nil {
				t.Units = make(map[string]int)
			}
			t.Units[u] += v
		}
	}
	return t
}

// queueOf returns the queue a wait for c with ctx's class takes:
// retries' for a retry, else its class's (throttle.WithPriority). A wait
// of a class but the default's stops the Limiter's leases (maxLease).
func (q *Limiter) queueOf(ctx context.Context, c throttle.Cost) int {
	if c.Retry {
		return queueRetry
	}
	qi := schedule.ClassQueue(int(throttle.PriorityFrom(ctx)))
	if qi != queueFirst {
		q.classes.Store(true)
	}
	return qi
}

// costOf returns c's cost in each further limit (N in those of Unit "",
// the units c names in the others), checked as a wait's: every unit
// named has a limit, no cost is negative or more than its limit holds at
// once. nil for a Limiter without further limits.
func (q *Limiter) costOf(c throttle.Cost) ([]float64, error) {
	x := q.xconfig()
	if x == nil {
		for u := range c.Units {
			return nil, fmt.Errorf("%w: limiter %q has no limit in unit %q", throttle.ErrInvalidLimit, q.name, u)
		}
		return nil, nil
	}
	cost := make([]float64, len(x.units))
	for i, u := range x.units {
		if u == "" {
			cost[i] = float64(c.N)
		} else {
			cost[i] = float64(c.Units[u])
		}
		if cost[i] > x.most[i] {
			return nil, fmt.Errorf("%w: a cost of %v %s, more than a limit of limiter %q holds at once (%v)", throttle.ErrCostExceedsBurst, cost[i], unitName(u), q.name, x.most[i])
		}
	}
	for u, n := range c.Units {
		if n < 0 {
			return nil, fmt.Errorf("%w: a cost of %d %s for limiter %q: costs are never negative", throttle.ErrInvalidLimit, n, u, q.name)
		}
		if !x.has(u) {
			return nil, fmt.Errorf("%w: limiter %q has no limit in unit %q", throttle.ErrInvalidLimit, q.name, u)
		}
	}
	return cost, nil
}

// has reports whether u is the unit of a further limit; "" never is
// (a Cost counts the unit waits count in N).
func (x *xconf) has(u string) bool {
	if u == "" {
		return false
	}
	for _, v := range x.units {
		if v == u {
			return true
		}
	}
	return false
}

// unitName names a unit in errors: "" is the unit waits count.
func unitName(u string) string {
	if u == "" {
		return "units"
	}
	return u
}

// xargs returns the script's arguments of a cost in the further limits
// (the configuration, then a cost each); nil for a Limiter without
// further limits.
func (q *Limiter) xargs(cost []float64) []any {
	x := q.xconfig()
	if x == nil {
		return nil
	}
	args := make([]any, 0, 1+len(cost))
	args = append(args, x.spec)
	for _, c := range cost {
		args = append(args, strconv.FormatFloat(c, 'g', -1, 64))
	}
	return args
}

// limitsError returns the script's refusal of this process's further
// limits (THROTTLE_LIMITS: a key's state written with others, and a
// Version no lower) as an error matching [ErrConfigMismatch]; nil for
// any other error.
func (w *keyWaiter) limitsError(err error) error {
	if err == nil {
		return nil // before re escapes: a wait's common case allocates nothing here
	}
	var re redis.Error
	if !errors.As(err, &re) {
		return nil
	}
	if msg, found := strings.CutPrefix(re.Error(), "THROTTLE_MULTI "); found {
		return fmt.Errorf("%w: limiter %q, key %q: %s (a process without this process's further limits)", ErrConfigMismatch, w.q.name, w.key, msg)
	}
	stored, found := strings.CutPrefix(re.Error(), "THROTTLE_LIMITS ")
	if !found {
		return nil
	}
	return fmt.Errorf("%w: limiter %q, key %q: this process has further limits %q; the key's state in Redis was written with %q (version|limits). "+
		"Give every process sharing the limiter the same limits, or raise Version to replace them",
		ErrConfigMismatch, w.q.name, w.key, w.q.xconfig().spec, stored)
}
