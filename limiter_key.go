package throttle

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/throttle-go/throttle/internal/local"
	"github.com/throttle-go/throttle/internal/schedule"
	"golang.org/x/time/rate"
)

// limiterKey is one key of a Limiter, as For returns it: the key of
// package local (its state, its sleeping waits) with the [Quota] methods.
// The conversion from *local.Key is free.
type limiterKey local.Key

func (q *limiterKey) k() *local.Key { return (*local.Key)(q) }

// l returns the Limiter the key belongs to.
func (q *limiterKey) l() *Limiter { return q.k().Owner().(*Limiter) }

// WaitN waits for n units of the key's first limit: Wait of Cost{N: n},
// which spends them on every limit of Unit "".
func (q *limiterKey) WaitN(ctx context.Context, n int) error {
	v, err := q.l().costN(q.k(), n)
	if err != nil {
		return err
	}
	return q.refused(ctx, q.k().Wait(ctx, n, v, classQueue(ctx)))
}

// Wait waits for cost: see [Quota].
func (q *limiterKey) Wait(ctx context.Context, cost ...Cost) error {
	c := sum(cost)
	v, err := q.l().waitCost(q.k(), c)
	if err != nil {
		return err
	}
	return q.refused(ctx, q.k().Wait(ctx, c.N, v, queueOf(ctx, c)))
}

// refused converts a wait's error (keyErr) and reports one of a full
// queue as an EventQueueFull to the Limiter's OnEvent and the call's
// context ([WithEvents]).
func (q *limiterKey) refused(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	e := keyErr(q.k().Name(), err)
	if qe, ok := err.(*local.QueueFullError); ok {
		if to := q.l().listener(ctx, q.k().Name()); to.Emit != nil {
			to.Emit(local.Decided{Kind: local.QueueFull, Units: float64(qe.N), Err: e})
		}
	}
	return e
}

// Try spends cost now, or nothing: see [Quota].
func (q *limiterKey) Try(ctx context.Context, cost ...Cost) (bool, time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return false, 0, err
	}
	c := sum(cost)
	v, err := q.l().waitCost(q.k(), c)
	if err != nil {
		return false, 0, err
	}
	ok, d, err := q.k().Try(ctx, c.N, v, classQueue(ctx))
	return ok, d, keyErr(q.k().Name(), err)
}

// Allow spends cost now, or nothing: see [Quota].
func (q *limiterKey) Allow(cost ...Cost) bool {
	ok, _, _ := q.Try(context.Background(), cost...)
	return ok
}

// AllowN spends n units of the first limit now, or nothing.
func (q *limiterKey) AllowN(n int) bool {
	v, err := q.l().costN(q.k(), n)
	if err != nil {
		return false
	}
	ok, _, _ := q.k().Try(context.Background(), n, v, schedule.First)
	return ok
}

// Reserve takes a turn for cost without waiting: see [Quota].
func (q *limiterKey) Reserve(ctx context.Context, cost ...Cost) (Reservation, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := sum(cost)
	v, err := q.l().waitCost(q.k(), c)
	if err != nil {
		return nil, err
	}
	return q.reserve(ctx, c.N, v, queueOf(ctx, c))
}

// ReserveN takes a turn for n units of the first limit: see [Quota].
func (q *limiterKey) ReserveN(ctx context.Context, n int) (Reservation, error) {
	v, err := q.l().costN(q.k(), n)
	if err != nil {
		return nil, err
	}
	return q.reserve(ctx, n, v, classQueue(ctx))
}

func (q *limiterKey) reserve(ctx context.Context, n int, v []float64, qi int) (Reservation, error) {
	r, err := q.k().Reserve(ctx, n, v, qi)
	if err != nil {
		return nil, q.refused(ctx, err)
	}
	return &reservation{r: r, key: q.k().Name()}, nil
}

// Pause holds every caller of the key until d from now: see [Quota]. It
// never blocks and never fails.
func (q *limiterKey) Pause(ctx context.Context, d time.Duration) error {
	q.k().Pause(d, q.l().listener(ctx, q.k().Name()))
	return nil
}

// Observe applies what a response said of the key's quota: see [Quota].
// It never blocks and never fails.
func (q *limiterKey) Observe(ctx context.Context, f Feedback) (Observed, error) {
	timing, pause := q.k().Adapt(responseOf(f), q.l().listener(ctx, q.k().Name()))
	return Observed{Pause: pause, Timing: timing}, nil
}

// Settle amends a wait that spent spent to actual: see [Quota]. It never
// blocks, and fails only for a cost the key could not have spent.
func (q *limiterKey) Settle(ctx context.Context, spent, actual Cost) error {
	l, k := q.l(), q.k()
	d, err := l.settleUnits(k, spent, actual)
	if err != nil {
		return err
	}
	return keyErr(k.Name(), k.Settle(spent.N, actual.N, d, l.listener(ctx, k.Name())))
}

// Acquire takes n units under the key's in-flight cap: see [Quota]. A
// wait that blocked 1ms or more is reported as an [EventInFlight] to the
// Limiter's OnEvent and the call's context ([WithEvents]).
func (q *limiterKey) Acquire(ctx context.Context, n int) (func(), error) {
	release, err := q.k().Acquire(ctx, n, q.l().listener(ctx, q.k().Name()))
	return release, keyErr(q.k().Name(), err)
}

// NoInFlightCap reports whether the key has no in-flight cap, so that a
// Transport holds nothing for its requests.
func (q *limiterKey) NoInFlightCap() bool { return !q.k().Capped() }

// State returns the key's state now: see [State]. It never fails for a
// Limiter's key.
func (q *limiterKey) State(ctx context.Context) (State, error) {
	v := q.k().View(true)
	st := stateOf(v, time.Now())
	if len(v.Limits) > 0 {
		units := q.l().limits(q.k().Name()).units
		st.Limits = make([]LimitState, len(v.Limits))
		for i, x := range v.Limits {
			st.Limits[i] = LimitState{Unit: units[i], Window: x.Window, Remaining: x.Remaining}
		}
	}
	return st, nil
}

// stateOf converts a key's view, taken at at, to a State.
func stateOf(v local.View, at time.Time) State {
	st := State{
		At:               at,
		Tokens:           v.Tokens,
		Remaining:        v.Remaining,
		Next:             local.Duration(v.Next - v.Now),
		Paused:           local.Duration(v.Hold - v.Now),
		Queued:           int64(v.Queued),
		QueuedCritical:   int64(v.Critical),
		QueuedBackground: int64(v.Background),
		Rate:             rate.Inf,
		Burst:            v.Burst,
		SlowedDown:       v.Cut,
		Declared:         v.Declared,
	}
	switch {
	case v.Interval >= local.NeverInterval:
		st.Rate = 0 // a bucket that does not refill (Rate 0)
	case v.Interval > 0:
		st.Rate = rate.Limit(v.Sec / v.Interval)
	}
	if v.Window {
		st.Window = &ServerWindow{Remaining: v.WindowLeft, Reset: local.Duration(v.WindowReset - v.Now)}
	}
	return st
}

// waitCost converts c to the key's further limits' costs for a wait (a
// wait is at least one unit of the first limit when it names units of
// further limits).
func (l *Limiter) waitCost(k *local.Key, c Cost) ([]float64, error) {
	if c.N == 0 {
		for _, v := range c.Units {
			if v != 0 {
				return nil, fmt.Errorf("throttle: a cost of no unit of the first limit (N 0) names units %v: a wait is at least one unit of its first limit: %w", c.Units, ErrInvalidLimit)
			}
		}
	}
	return l.costOf(k, c)
}

// costOf converts c's units to the key's further limits' costs: nil for
// a cost that names no unit and a key whose further limits count none of
// the first limit's.
func (l *Limiter) costOf(k *local.Key, c Cost) ([]float64, error) {
	conf := l.limits(k.Name())
	units := conf.units
	if len(units) == 0 {
		if len(c.Units) > 0 {
			for u := range c.Units {
				return nil, fmt.Errorf("throttle: %q has no limit in unit %q: %w", k.Name(), u, ErrInvalidLimit)
			}
		}
		return nil, nil
	}
	// What each limit holds at once, from the configuration: the key's
	// own copies of the limits change as units go, under its lock.
	lim := conf.lim
	v := make([]float64, len(units))
	for i, u := range units {
		if u == "" {
			v[i] = float64(c.N)
		} else {
			v[i] = float64(c.Units[u])
		}
		if most := lim[i].Most(); v[i] > most {
			return nil, fmt.Errorf("throttle: a cost of %v %s for %q, more than its limit %v holds at once: %w", v[i], unitName(u), k.Name(), most, ErrCostExceedsBurst)
		}
	}
	for u, n := range c.Units {
		if n < 0 {
			return nil, fmt.Errorf("throttle: a cost of %d %s for %q: costs are never negative: %w", n, u, k.Name(), ErrInvalidLimit)
		}
		if u == "" || !slices.Contains(units, u) {
			return nil, fmt.Errorf("throttle: %q has no limit in unit %q: %w", k.Name(), u, ErrInvalidLimit)
		}
	}
	return v, nil
}

// costN is costOf for Cost{N: n}, the cost of WaitN, AllowN and
// ReserveN: nil, allocating nothing, for a key none of whose further
// limits counts the first limit's unit.
func (l *Limiter) costN(k *local.Key, n int) ([]float64, error) {
	if !slices.Contains(l.limits(k.Name()).units, "") {
		return nil, nil
	}
	return l.costOf(k, Cost{N: n})
}

// unitName names a unit in errors: "" is the first limit's.
func unitName(u string) string {
	if u == "" {
		return "units"
	}
	return u
}

// settleUnits returns, per further limit, actual − spent (nil for a key
// without further limits). A unit actual does not name stays as spent;
// the first limit's units follow N.
func (l *Limiter) settleUnits(k *local.Key, spent, actual Cost) ([]float64, error) {
	units := l.limits(k.Name()).units
	s, err := l.costOf(k, spent)
	if err != nil || s == nil {
		return nil, err
	}
	for u, n := range actual.Units {
		if n < 0 {
			return nil, fmt.Errorf("throttle: settle %d %s of %q: costs are never negative: %w", n, u, k.Name(), ErrInvalidLimit)
		}
		if !slices.Contains(units, u) {
			return nil, fmt.Errorf("throttle: %q has no limit in unit %q: %w", k.Name(), u, ErrInvalidLimit)
		}
	}
	d := make([]float64, len(units))
	for i, u := range units {
		switch n, named := actual.Units[u]; {
		case u == "":
			d[i] = float64(actual.N) - s[i]
		case named:
			d[i] = float64(n) - s[i]
		}
	}
	return d, nil
}

// listener returns who is told of the decisions of a call with ctx on key:
// the Limiter's OnEvent and the call's listener ([WithEvents]); no one if
// neither is set.
func (l *Limiter) listener(ctx context.Context, key string) local.Listener {
	sink := sinkFrom(ctx)
	if sink == nil && l.OnEvent == nil {
		return local.Listener{}
	}
	to := local.Listener{Emit: func(d local.Decided) {
		e := eventOf(l, key, d)
		if sink != nil {
			e = sink.fill(e)
		}
		if l.OnEvent != nil {
			l.OnEvent(e)
		}
		if sink != nil {
			sink.fn(e)
		}
	}}
	if sink != nil {
		fn := sink.fn
		to.Call = func(d local.Decided) { fn(eventOf(l, key, d)) }
	}
	return to
}

// eventOf converts a key's decision to an Event.
func eventOf(owner any, key string, d local.Decided) Event {
	e := Event{Key: key, Rate: d.Rate, Burst: d.Burst, Remaining: d.Remaining, Delay: d.Delay, Err: d.Err}
	switch d.Kind {
	case local.SlowDown:
		e.Kind = EventSlowDown
	case local.Recovered:
		e.Kind = EventRecovered
	case local.Shift:
		e.Kind = EventShift
	case local.Window:
		e.Kind = EventWindow
	case local.Declared:
		e.Kind = EventDeclared
	case local.InFlight:
		e.Kind = EventInFlight
	case local.QueueFull:
		e.Kind, e.Units = EventQueueFull, d.Units
	case local.Clamp:
		e.Kind, e.Units = EventClamp, d.Units
		e.Unit = ""
		if d.Limit >= 0 {
			if l, ok := owner.(*Limiter); ok {
				e.Unit = l.limits(key).units[d.Limit]
			}
		}
	}
	return e
}

// responseOf converts f to what a key of package local takes.
func responseOf(f Feedback) local.Response {
	r := local.Response{
		Cost: f.Spent, Age: f.Age, Pause: f.Pause,
		Refused:   f.Verdict == Refused || f.Verdict == RefusedBare,
		Throttled: f.Verdict == RefusedBare,
		Accepted:  f.Verdict == Accepted,
	}
	if w := f.Window; w != nil {
		r.HasRemaining, r.Remaining, r.Size, r.Reset, r.Window = true, w.Remaining, w.Size, w.Reset, w.Length
	}
	if a := f.Available; a != nil {
		r.HasAvailable, r.Available = true, *a
	}
	if d := f.Declared; d != nil {
		r.HasDeclared, r.DeclaredRate, r.DeclaredBurst = true, d.Rate, d.Burst
	}
	return r
}
