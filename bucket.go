package throttle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/throttle-go/throttle/internal/local"
	"github.com/throttle-go/throttle/internal/schedule"
	"golang.org/x/time/rate"
)

// bucket is one key of a Limiter, as For returns it: the key of package
// local (its state, its sleeping waits), with the public contract's
// methods. The conversion from *local.Key is free.
type bucket local.Key

func (b *bucket) k() *local.Key { return (*local.Key)(b) }

// l returns the Limiter the key belongs to.
func (b *bucket) l() *Limiter { return b.k().Owner().(*Limiter) }

// WaitN waits for n units of the key's quota.
func (b *bucket) WaitN(ctx context.Context, n int) error {
	return b.l().err(b.k().Name(), b.k().Wait(ctx, n, nil, schedule.First))
}

// WaitRetryN waits for n units of the key's quota ahead of first
// attempts: see [RetryWaiter].
func (b *bucket) WaitRetryN(ctx context.Context, n int) error {
	return b.l().err(b.k().Name(), b.k().Wait(ctx, n, nil, schedule.Retry))
}

// WaitCost waits for c on the key's limits: see [CostWaiter].
func (b *bucket) WaitCost(ctx context.Context, c Cost) error {
	l, k := b.l(), b.k()
	cost, err := l.costOf(k, c.Units)
	if err != nil {
		return err
	}
	n, qi := c.turn()
	return l.err(k.Name(), k.Wait(ctx, n, cost, qi))
}

// TryN spends n units of the key's quota now, or nothing: see [Trier].
// It never blocks, and fails only for a cost the key cannot serve or a
// ctx that has ended.
func (b *bucket) TryN(ctx context.Context, n int) (bool, time.Duration, error) {
	ok, d, err := b.k().Try(ctx, n, nil)
	return ok, d, b.l().err(b.k().Name(), err)
}

// TryCost spends c of the key's limits now, or nothing: see [CostTrier].
func (b *bucket) TryCost(ctx context.Context, c Cost) (bool, time.Duration, error) {
	l, k := b.l(), b.k()
	if err := ctx.Err(); err != nil {
		return false, 0, err
	}
	cost, err := l.costOf(k, c.Units)
	if err != nil {
		return false, 0, err
	}
	ok, d, err := k.Try(ctx, c.First(), cost)
	return ok, d, l.err(k.Name(), err)
}

// Allow reports whether one unit of the key's quota could be spent now,
// and spends it if so: TryN(ctx, 1) without a context (it never blocks).
// It is x/time/rate's Allow for a key.
func (b *bucket) Allow() bool {
	ok, _, _ := b.TryN(context.Background(), 1)
	return ok
}

// ReserveN takes a turn for n units of the key's quota and returns it
// without waiting: see [Reserver].
func (b *bucket) ReserveN(ctx context.Context, n int) (Reservation, error) {
	r, err := b.k().Reserve(ctx, n, nil, schedule.First)
	if err != nil {
		return nil, b.l().err(b.k().Name(), err)
	}
	return &reservation{r: r, key: b.k().Name()}, nil
}

// ReserveCost takes a turn for c on the key's limits and returns it
// without waiting: see [CostReserver].
func (b *bucket) ReserveCost(ctx context.Context, c Cost) (Reservation, error) {
	l, k := b.l(), b.k()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cost, err := l.costOf(k, c.Units)
	if err != nil {
		return nil, err
	}
	n, qi := c.turn()
	r, err := k.Reserve(ctx, n, cost, qi)
	if err != nil {
		return nil, l.err(k.Name(), err)
	}
	return &reservation{r: r, key: k.Name()}, nil
}

// reservation is a Limiter key's Reservation.
type reservation struct {
	r   *local.Reservation
	key string
}

// Delay implements [Reservation]: the turn as the key's state is now.
func (r *reservation) Delay() time.Duration { return r.r.Delay() }

// Cancel implements [Reservation].
func (r *reservation) Cancel() { r.r.Cancel() }

// Wait implements [Reservation].
func (r *reservation) Wait(ctx context.Context) error {
	return keyErr(r.key, r.r.Wait(ctx))
}

// Pause holds off every caller of the key until d from now: the queued
// waits included, which then go at the key's pace from the pause's end (a
// burst at most at once). A pause never shortens a longer one. It does not
// block and never fails.
func (b *bucket) Pause(ctx context.Context, d time.Duration) error {
	b.k().Pause(d, b.l().listener(ctx, b.k().Name()))
	return nil
}

// Adapt applies what a server said about the key's quota: see [Adapter].
// It never blocks and never fails.
func (b *bucket) Adapt(ctx context.Context, f Feedback) error {
	b.adapt(ctx, f)
	return nil
}

// AdaptReport is Adapt, and reports what it did: see [AdaptReporter].
func (b *bucket) AdaptReport(ctx context.Context, f Feedback) (Adapted, error) {
	timing, pause := b.adapt(ctx, f)
	return Adapted{Pause: pause, Timing: timing}, nil
}

func (b *bucket) adapt(ctx context.Context, f Feedback) (timing bool, pause time.Duration) {
	return b.k().Adapt(local.Response{
		Cost: f.Cost, Age: f.Age, Pause: f.Pause,
		Refused: f.Refused, Throttled: f.Throttled, Accepted: f.Accepted,
		HasRemaining: f.HasRemaining, Remaining: f.Remaining, Size: f.Size, Reset: f.Reset, Window: f.Window,
		HasDeclared: f.HasDeclared, DeclaredRate: f.DeclaredRate, DeclaredBurst: f.DeclaredBurst,
		HasAvailable: f.HasAvailable, Available: f.Available,
	}, b.l().listener(ctx, b.k().Name()))
}

// Settle amends the cost of a wait of the key that spent spent units to
// actual: see [Settler]. It never blocks, and fails only for a cost the
// key could not have spent.
func (b *bucket) Settle(ctx context.Context, spent, actual int) error {
	return b.l().err(b.k().Name(), b.k().Settle(spent, actual, nil))
}

// SettleCost amends a wait of the key that spent spent to what it really
// cost, actual: see [CostSettler].
func (b *bucket) SettleCost(ctx context.Context, spent, actual Cost) error {
	l, k := b.l(), b.k()
	d, err := l.settleUnits(k, spent.Units, actual.Units)
	if err != nil {
		return err
	}
	return l.err(k.Name(), k.Settle(spent.First(), actual.First(), d))
}

// AcquireN waits until n units fit under the key's in-flight cap and
// takes them: see [Acquirer]. A wait that blocked 1ms or more is reported
// as an [EventInFlight] to the Limiter's OnEvent and the call's context
// ([WithEvents]).
func (b *bucket) AcquireN(ctx context.Context, n int) (func(), error) {
	release, err := b.k().Acquire(ctx, n, b.l().listener(ctx, b.k().Name()))
	return release, b.l().err(b.k().Name(), err)
}

// NoInFlightCap reports whether the key has no in-flight cap, so that a
// Transport holds nothing for it.
func (b *bucket) NoInFlightCap() bool { return !b.k().Capped() }

// State returns the key's state now: see [State]. It never fails for a
// Limiter's key.
func (b *bucket) State(ctx context.Context) (State, error) {
	return stateOf(b.k().View(false), time.Now()), nil
}

// stateOf converts a key's view, taken at at, to a State.
func stateOf(v local.View, at time.Time) State {
	st := State{
		At:        at,
		Tokens:    v.Tokens,
		Remaining: v.Remaining,
		Next:      local.Duration(v.Next - v.Now),
		Paused:    local.Duration(v.Hold - v.Now),
		Queued:    int64(v.Queued),
		Limit:     rate.Inf,
		Burst:     v.Burst,
		Cut:       v.Cut,
		Declared:  v.Declared,
	}
	switch {
	case v.Interval >= local.NeverInterval:
		st.Limit = 0 // a bucket that does not refill (Limit 0)
	case v.Interval > 0:
		st.Limit = rate.Limit(v.Sec / v.Interval)
	}
	if v.Window {
		st.Window, st.WindowLeft = true, v.WindowLeft
		st.WindowReset = local.Duration(v.WindowReset - v.Now)
	}
	return st
}

// err converts an error of package local for key to the package's own.
func (l *Limiter) err(key string, err error) error {
	if err == nil {
		return nil
	}
	return keyErr(key, err)
}

func keyErr(key string, err error) error {
	var de *local.DeadlineError
	var le *local.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &de):
		return &DeadlineError{Key: key, Delay: de.Delay}
	case errors.As(err, &le):
		sentinel := ErrInvalidLimit
		if le.Err == local.ErrCost {
			sentinel = ErrCostExceedsBurst
		}
		return fmt.Errorf("throttle: %s: %w", le.Msg, sentinel)
	}
	return err
}

// costOf converts units to the key's further limits' costs: nil for a key
// without further limits (which then names no unit).
func (l *Limiter) costOf(k *local.Key, units []UnitCost) ([]float64, error) {
	names := l.unitsOf(k.Name())
	if len(units) == 0 {
		return nil, nil
	}
	most := k.Most()
	cost := make([]float64, len(names))
	for _, u := range units {
		if u.N < 0 {
			return nil, fmt.Errorf("throttle: wait for %d %s of %q: %w", u.N, u.Unit, k.Name(), ErrInvalidLimit)
		}
		found := false
		for i, v := range names {
			if v != u.Unit {
				continue
			}
			found = true
			cost[i] += float64(u.N)
			if cost[i] > most[i] {
				return nil, fmt.Errorf("throttle: wait for %v %s of %q, more than one of its limits allows at once: %w", cost[i], u.Unit, k.Name(), ErrCostExceedsBurst)
			}
		}
		if !found {
			return nil, fmt.Errorf("throttle: %q has no limit in unit %q: %w", k.Name(), u.Unit, ErrInvalidLimit)
		}
	}
	return cost, nil
}

// settleUnits returns, per further limit, actual − spent (nil for a key
// without further limits, which then names no unit). It checks spent as
// a wait's cost (costOf) and actual's units as known and not negative.
func (l *Limiter) settleUnits(k *local.Key, spent, actual []UnitCost) ([]float64, error) {
	if len(spent) == 0 && len(actual) == 0 {
		return nil, nil
	}
	names := l.unitsOf(k.Name())
	d, err := l.costOf(k, spent)
	if err != nil {
		return nil, err
	}
	if d == nil {
		d = make([]float64, len(names))
	}
	// A unit actual does not name stays as spent.
	for i, v := range names {
		if slices.ContainsFunc(actual, func(u UnitCost) bool { return u.Unit == v }) {
			d[i] = -d[i]
		} else {
			d[i] = 0
		}
	}
	for _, u := range actual {
		if u.N < 0 {
			return nil, fmt.Errorf("throttle: settle %d %s of %q: costs are never negative: %w", u.N, u.Unit, k.Name(), ErrInvalidLimit)
		}
		found := false
		for i, v := range names {
			if v == u.Unit {
				found = true
				d[i] += float64(u.N)
			}
		}
		if !found {
			return nil, fmt.Errorf("throttle: %q has no limit in unit %q: %w", k.Name(), u.Unit, ErrInvalidLimit)
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
	to := local.Listener{Emit: func(d local.Decision) {
		e := eventOf(key, d)
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
		to.Call = func(d local.Decision) { fn(eventOf(key, d)) }
	}
	return to
}

// eventOf converts a key's decision to an Event.
func eventOf(key string, d local.Decision) Event {
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
	}
	return e
}
