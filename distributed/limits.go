package distributed

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttle-go/throttle"
	"golang.org/x/time/rate"
)

// Several limits per key (throttle's schedule_limits.go, in the script
// as op mwait): Quota.Limits are token buckets in units of their own
// beside the quota's bucket, kept in the key's one hash (one Cluster
// slot) and spent all or none by one EVALSHA per wait, the turn the
// latest among the limits, FIFO across the fleet. A wait of such a quota
// that goes at once on a key with nothing queued takes mwait's fast path
// (the limits kept in the core: one field read and written) or its
// shortcut, any other the general path. Its waits take no leased turns.

// xconf is Quota.Limits as the script takes them.
type xconf struct {
	// spec: "Version|" then a limit each, comma-separated: "b:interval
	// µs/burst" a bucket, "f:length µs/count" a fixed window, "s:…" a
	// sliding one, "l:…" a sliding log, "u:…" a fixed window aligned to
	// first use.
	spec   string
	units  []string  // their units (a unit may have several limits)
	most   []float64 // the largest cost of each; +Inf: no limit
	window []bool    // whether each is a window (else a bucket)
	err    error     // Limits invalid: every wait fails with it
}

// xconfig returns q.Limits as the script takes them, nil if none.
func (q *Quota) xconfig() *xconf {
	q.xOnce.Do(func() {
		if len(q.Limits) == 0 {
			return
		}
		x := &xconf{}
		var spec []string
		add := func(unit, s string, most float64) {
			x.units, x.most, spec = append(x.units, unit), append(x.most, most), append(spec, s)
			x.window = append(x.window, s[0] != 'b')
		}
		for i, u := range q.Limits {
			r, w := u.Rate, u.Window
			switch {
			case u.Unit == "":
				x.err = fmt.Errorf("%w: Limits[%d] of quota %q has no unit", throttle.ErrInvalidLimit, i, q.name)
			case r.Limit < 0 || r.Burst < 0 || math.IsNaN(float64(r.Limit)):
				x.err = fmt.Errorf("%w: Limits[%d] (%q) of quota %q has limit %v, burst %d", throttle.ErrInvalidLimit, i, u.Unit, q.name, r.Limit, r.Burst)
			case w.Per > 0 && w.Count < 1:
				x.err = fmt.Errorf("%w: Limits[%d] (%q) of quota %q has a window of %d per %v", throttle.ErrInvalidLimit, i, u.Unit, q.name, w.Count, w.Per)
			case w.Per > 0 && w.Log && w.Sliding:
				x.err = fmt.Errorf("%w: Limits[%d] (%q) of quota %q has a window both Sliding and Log (a sliding log): choose one", throttle.ErrInvalidLimit, i, u.Unit, q.name)
			case w.Per > 0 && w.FirstUse && (w.Sliding || w.Log):
				x.err = fmt.Errorf("%w: Limits[%d] (%q) of quota %q has a window aligned to first use that is Sliding or a Log: FirstUse is for fixed windows", throttle.ErrInvalidLimit, i, u.Unit, q.name)
			case w.Per > 0 && w.Log && w.Count > throttle.MaxLogCount:
				x.err = fmt.Errorf("%w: Limits[%d] (%q) of quota %q has a sliding log of %d per %v, more than MaxLogCount (%d) times a key keeps: use Sliding (the sliding window counter) for counts this large",
					throttle.ErrInvalidLimit, i, u.Unit, q.name, w.Count, w.Per, throttle.MaxLogCount)
			}
			if r.Limit != rate.Inf && (r.Limit != 0 || r.Burst != 0) {
				// Limit 0 with a Burst: the bucket never refills (one unit
				// per 3e233 years, finite as in the Limiter).
				burst := max(r.Burst, 1)
				iv := min(1e6/float64(r.Limit), 1e247)
				add(u.Unit, "b:"+strconv.FormatFloat(iv, 'g', -1, 64)+"/"+strconv.Itoa(burst), float64(burst))
			}
			if w.Per > 0 {
				kind := "f:"
				switch {
				case w.Sliding:
					kind = "s:"
				case w.Log:
					kind = "l:"
				case w.FirstUse:
					kind = "u:"
				}
				add(u.Unit, kind+strconv.FormatInt(w.Per.Microseconds(), 10)+"/"+strconv.Itoa(w.Count), float64(w.Count))
			}
		}
		x.spec = strconv.Itoa(q.Version) + "|" + strings.Join(spec, ",")
		if len(spec) > 0 || x.err != nil {
			q.x = x
		}
	})
	return q.x
}

// xargs returns the script's arguments of a wait of units on q's further
// limits (the configuration, then a cost each), nil for a quota without
// them.
func (q *Quota) xargs(units []throttle.UnitCost) ([]any, error) {
	x := q.xconfig()
	if x == nil {
		if len(units) > 0 {
			return nil, fmt.Errorf("%w: quota %q has no limit in unit %q", throttle.ErrInvalidLimit, q.name, units[0].Unit)
		}
		return nil, nil
	}
	if x.err != nil {
		return nil, x.err
	}
	cost := make([]float64, len(x.units))
	for _, u := range units {
		if u.N < 0 {
			return nil, fmt.Errorf("%w: negative cost %d %s", throttle.ErrInvalidLimit, u.N, u.Unit)
		}
		found := false
		for i, v := range x.units {
			if v != u.Unit {
				continue
			}
			found = true
			cost[i] += float64(u.N)
			if cost[i] > x.most[i] {
				return nil, fmt.Errorf("%w: cost %v %s, more than a limit of quota %q allows at once (%v)", throttle.ErrCostExceedsBurst, cost[i], u.Unit, q.name, x.most[i])
			}
		}
		if !found {
			return nil, fmt.Errorf("%w: quota %q has no limit in unit %q", throttle.ErrInvalidLimit, q.name, u.Unit)
		}
	}
	args := make([]any, 0, 1+len(cost))
	args = append(args, x.spec)
	for _, c := range cost {
		args = append(args, strconv.FormatFloat(c, 'g', -1, 64))
	}
	return args, nil
}

// limitsError returns the script's refusal of this process's Limits
// (THROTTLE_LIMITS: a key's state written with other Limits, and a
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
		return fmt.Errorf("%w: quota %q, key %q: %s (a process without this process's Limits)", ErrConfigMismatch, w.q.name, w.key, msg)
	}
	stored, found := strings.CutPrefix(re.Error(), "THROTTLE_LIMITS ")
	if !found {
		return nil
	}
	return fmt.Errorf("%w: quota %q, key %q: this process has Limits %q; the key's state in Redis was written with %q (version|limits). "+
		"Give every process sharing the quota the same Limits, or raise Version to replace them",
		ErrConfigMismatch, w.q.name, w.key, w.q.xconfig().spec, stored)
}

// WaitCost implements [throttle.CostWaiter]: it waits for c on the key's
// limits (the quota's bucket and Quota.Limits), spent on all of them at
// once or on none, in one script call.
func (w *keyWaiter) WaitCost(ctx context.Context, c throttle.Cost) error {
	n := c.First()
	if err := w.q.check(n); err != nil {
		return err
	}
	x, err := w.q.xargs(c.Units)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err = w.waitDirectX(ctx, n, costQueue(c), x, c.Units)
	return err
}

// costQueue returns the queue a wait for c takes: retries' for a
// retry, else first attempts'.
func costQueue(c throttle.Cost) int {
	if c.Retry {
		return queueRetry
	}
	return queueFirst
}

// TryCost implements [throttle.CostTrier]: c spent on every limit now,
// or nothing, in one script call.
func (w *keyWaiter) TryCost(ctx context.Context, c throttle.Cost) (bool, time.Duration, error) {
	n := c.First()
	x, err := w.q.xargs(c.Units)
	if err != nil {
		return false, 0, err
	}
	return w.tryX(ctx, n, x, c.Units)
}

// WaitCost waits for c on the quota's own key (""): see
// [keyWaiter.WaitCost].
func (q *Quota) WaitCost(ctx context.Context, c throttle.Cost) error {
	return q.defaultWaiter().WaitCost(ctx, c)
}

// LimitStates returns the state of key's further limits now
// ([Quota].Limits, in their order; a limit with both a Rate and a Window
// shows as two), as [throttle.Limiter.LimitStates] does for a Limiter's:
// each limit's units left once the waits queued have spent theirs. It is
// one script call that changes nothing (no fail mode: an error if Redis
// cannot answer); nil if the quota has no further limits.
func (q *Quota) LimitStates(ctx context.Context, key string) ([]throttle.LimitState, error) {
	x := q.xconfig()
	if x == nil {
		return nil, nil
	}
	if x.err != nil {
		return nil, x.err
	}
	w := q.For(key).(*keyWaiter)
	// ARGV[5…10] are a wait's; mstate reads the configuration only.
	reply, err := w.run(ctx, "mstate", "", "", "", "", "", "", x.spec)
	if lerr := w.limitsError(err); lerr != nil {
		return nil, lerr
	}
	if err == nil && len(reply) != len(x.units)+1 {
		err = fmt.Errorf("unexpected reply %v from the schedule script", reply)
	}
	if err != nil {
		if errCaller(ctx, err) {
			return nil, err
		}
		return nil, fmt.Errorf("reading the limits of %q: %w", key, unavailable(err))
	}
	out := make([]throttle.LimitState, len(x.units))
	for i := range out {
		r := math.Inf(1)
		if reply[i] != 1<<53 {
			r = float64(reply[i]) / 1e6
		}
		out[i] = throttle.LimitState{Unit: x.units[i], Window: x.window[i], Remaining: r}
	}
	return out, nil
}
