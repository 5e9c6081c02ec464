package throttle

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/throttle-go/throttle/internal/local"
	"github.com/throttle-go/throttle/internal/schedule"
	"golang.org/x/time/rate"
)

// Rate is a token bucket's shape: Limit units per second on average, at most
// Burst at once. It uses x/time/rate's unit type, so rate.Every(time.Minute/60)
// and rate.Inf work as they do there.
//
// Zero means what it means in x/time/rate, with one exception, the zero
// Rate: Limit 0 with a Burst lets Burst units through and then nothing
// (the bucket never refills) until the rate is raised, so that a
// configuration meant to stop traffic stops it; rate.Inf is no limit.
// The zero Rate (Limit and Burst both 0), a Limiter's fields left unset,
// is no limit, so that the zero Limiter only honours pauses and what
// servers say. Burst 0 with a Limit is a burst of 1.
type Rate struct {
	Limit rate.Limit // units per second; rate.Inf: no limit; 0: no refill (see above)
	Burst int        // units that may be spent at once
}

// Limiter is an in-process, per-key set of token buckets: a host, an API key,
// a tenant, a route each get their own. It is the waiter most programs want:
//
//	lim := &throttle.Limiter{Limit: 10, Burst: 5}
//	err := lim.For("api.github.com").WaitN(ctx, 1)
//
// Most callers should use it through [Transport], or call WaitN on For(key)
// before each job that spends the quota.
//
// Waits are turns in a queue: a wait takes its place once and sleeps until
// its turn, callers are served in arrival order (retries, through
// [RetryWaiter], ahead of first attempts), a turn past ctx's deadline fails
// at once with [ErrWouldExceedDeadline] reserving nothing, and a wait whose
// ctx ends gives its units back exactly: the waits behind it move up. A
// key can be paused ([Pauser]) and paced by what servers say ([Adapter]),
// and cap the units it has in flight ([Limiter.InFlight], [Acquirer]).
// A key with a configured limit also reads its responses' round trips
// ([Feedback].Age) against a server that leaves no slack: a key one unit
// deep, once refused, goes no sooner than an interval after the server
// may have taken its last request, and every key moves its turns once per
// busy period by the spread of its first burst's round trips (both at
// most a tenth of an interval; see internal/strict).
// A turn is never stored: it follows from the key's state whenever it is
// asked for, so that pauses, slow-downs and refunds move every queued turn
// at once (see internal/schedule for the model and its invariants).
//
// Memory is bounded however many distinct keys arrive: a key whose bucket is
// full again, with nothing queued, paused, cut or windowed, and no units
// in flight under its cap, is indistinguishable from a new one, so it is
// forgotten losslessly when the map is swept; past MaxKeys, keys are
// forgotten even if not idle, those with units in flight last (such a
// key gets a fresh burst, and a fresh in-flight cap: units then in flight
// are not counted against it). Never more than MaxKeys are remembered.
//
// The bucket arithmetic is x/time/rate's (same Limit unit, same burst
// semantics), kept as a theoretical arrival time rather than in a
// rate.Limiter, because a rate.Limiter's Reservation.Cancel restores the
// wrong count when other reservations follow (golang/go#56924, #69419).
//
// What a key's waiter decides by itself from what servers say (a
// slow-down and its end, queued turns moved later, a window learned, a
// declared pace adopted) is reported to OnEvent, and to the function of
// the call's context ([WithEvents]), which is a [Transport]'s OnEvent for
// the calls a Transport makes.
//
// The zero Limiter has no limit: it only honours pauses and what servers
// say. Set the fields before the first wait and do not change them after
// (change a key's rate with [Limiter.SetRate]); a Limiter is safe for
// concurrent use.
type Limiter struct {
	// Limit is the rate of every key without an override, in units per
	// second. Zero means no limit (pauses are still honoured); negative is
	// an error on every wait.
	Limit rate.Limit

	// Burst is how many units a key may spend at once. Zero means 1.
	Burst int

	// Overrides sets a different Rate for particular keys, e.g.
	// {"api.github.com": {Limit: 1, Burst: 1}}. It is read at the first
	// wait; nil means none.
	Overrides map[string]Rate

	// Limits are further limits every key carries, each a token bucket in
	// a unit of its own (see [UnitLimit]), beside the bucket of Limit and
	// Burst (Overrides, SetRate) in the unit WaitN counts: e.g. tokens a
	// minute beside requests a minute. A wait spends on all of them at
	// once or on none ([CostWaiter]: WaitCost on For(key)); a wait that
	// names no unit (WaitN) spends nothing of them, but waits its turn
	// among the others. An invalid entry is an error on every wait. It is
	// read at the first wait; nil means none, and a key runs at its one
	// bucket exactly as without it.
	Limits []UnitLimit

	// LimitsOverrides sets other further limits for particular keys, in
	// the form Key returns, as Overrides does for Limit and Burst: e.g.
	// tokens a minute for "api.openai.com" alone. An entry replaces
	// Limits for its key (an empty one: none). It is read at the first
	// wait; nil means none.
	LimitsOverrides map[string][]UnitLimit

	// InFlight caps the units each key without an InFlightOverrides entry
	// may hold at once through [Acquirer] (AcquireN on For(key)), e.g. 100
	// for GitHub's concurrent requests: [Transport] holds a request's cost
	// from before its wait for quota until its response body is closed or
	// read to the end. Zero means no cap; negative is taken as zero.
	InFlight int

	// InFlightOverrides sets a different in-flight cap for particular
	// keys, in the form Key returns, as Overrides does for rates; an entry
	// of 0 means no cap for that key. It is read at the first wait; nil
	// means none.
	InFlightOverrides map[string]int

	// MaxKeys bounds how many keys are remembered at once. Zero means 1<<20.
	MaxKeys int

	// OnEvent, if not nil, is told of every decision a key's waiter takes
	// by itself from what servers said (see [Adapter]): a slow-down
	// (EventSlowDown) and its end (EventRecovered), queued turns moved
	// later (EventShift), a window learned (EventWindow), a declared pace
	// adopted (EventDeclared), an acquisition that blocked on a key's
	// in-flight cap (EventInFlight). It is for programs that use the Limiter
	// without a [Transport] (queue workers); a Transport's OnEvent gets
	// the decisions its responses caused without it (see [WithEvents]):
	// set one or the other to a function, not both, or each event comes
	// twice.
	//
	// It is called after the key's lock is released, so it may call the
	// Limiter (Len, For, Pause, Adapt; not a wait, which would block the
	// caller): synchronously from the Adapt or Pause that decided, and,
	// for EventRecovered, from a timer's goroutine when the slow-down
	// ends (armed only when someone listens; it keeps the Limiter until
	// then, a few seconds). It must not block.
	OnEvent func(Event)

	once  sync.Once
	keys  *local.Keys        // the keys
	def   *local.Key         // the Limiter's own quota (WaitN on the Limiter)
	xlim  []schedule.Limit   // Limits as the schedule keeps them; each key a copy
	xunit []string           // their units
	xerr  error              // Limits invalid: every wait fails with it
	xkeys map[string]xconfig // LimitsOverrides as the schedule keeps them
}

// xconfig is a key's further limits as the schedule keeps them.
type xconfig struct {
	lim   []schedule.Limit
	units []string
	err   error
}

func (l *Limiter) init() {
	l.keys = local.New(local.Config{MaxKeys: l.maxKeys(), Key: l.keyConfig, Owner: l, Decided: l.decided})
	l.xlim, l.xunit, l.xerr = l.xlimits(l.Limits)
	l.xkeys = make(map[string]xconfig, len(l.LimitsOverrides))
	for k, u := range l.LimitsOverrides {
		var x xconfig
		x.lim, x.units, x.err = l.xlimits(u)
		l.xkeys[k] = x
	}
	l.def = l.keys.Own("")
}

func (l *Limiter) maxKeys() int64 {
	if l.MaxKeys > 0 {
		return int64(l.MaxKeys)
	}
	return 1 << 20
}

// keyConfig returns a new key's configuration: its override, or the
// Limiter's.
func (l *Limiter) keyConfig(key string) local.KeyConfig {
	r, ok := l.Overrides[key]
	if !ok {
		r = Rate{Limit: l.Limit, Burst: l.Burst}
	}
	c := local.KeyConfig{Limit: r.Limit, Burst: r.Burst, Limits: l.xlim, Err: l.xerr, InFlight: int64(max(l.InFlight, 0))}
	if x, ok := l.xkeys[key]; ok {
		c.Limits, c.Err = x.lim, x.err
	}
	if v, ok := l.InFlightOverrides[key]; ok {
		c.InFlight = int64(max(v, 0))
	}
	return c
}

// unitsOf returns the units of key's further limits.
func (l *Limiter) unitsOf(key string) []string {
	if x, ok := l.xkeys[key]; ok {
		return x.units
	}
	return l.xunit
}

// decided tells OnEvent of a decision a key took from no call (a
// slow-down's end).
func (l *Limiter) decided(key string, d local.Decision) {
	if l.OnEvent != nil {
		l.OnEvent(eventOf(key, d))
	}
}

// bucket returns key's bucket; "" is the Limiter's own quota.
func (l *Limiter) bucket(key string) *bucket {
	l.once.Do(l.init)
	if key == "" {
		return (*bucket)(l.def)
	}
	return (*bucket)(l.keys.Get(key))
}

// For returns the waiter of key's quota; it also implements [Pauser],
// [Adapter], [RetryWaiter], [Trier], [Reserver], [Inspector] and
// [Settler] and [Acquirer] (the key's in-flight cap: see InFlight). For
// allocates only the first time a key is seen (or seen again after it was
// forgotten).
func (l *Limiter) For(key string) Waiter {
	l.once.Do(l.init)
	return (*bucket)(l.keys.Get(key))
}

// Len reports how many keys the Limiter remembers now.
func (l *Limiter) Len() int {
	l.once.Do(l.init)
	return l.keys.Len()
}

// now returns the schedules' time now, in ns.
func (l *Limiter) now() float64 {
	l.once.Do(l.init)
	return l.keys.Now()
}

// State returns the state of key's quota now, without creating the key:
// a key the Limiter does not remember (never seen, or forgotten) shows
// the state of a new key. The key "" is the Limiter's own quota (WaitN on
// the Limiter).
func (l *Limiter) State(key string) State {
	l.once.Do(l.init)
	k := l.def
	if key != "" {
		k = l.keys.Peek(key)
	}
	return stateOf(k.View(false), time.Now())
}

// LimitStates returns the state of key's further limits now
// ([Limiter.Limits], in their order; a limit with both a Rate and a
// Window shows as two), without creating the key; nil if it has none.
func (l *Limiter) LimitStates(key string) []LimitState {
	l.once.Do(l.init)
	k := l.def
	if key != "" {
		k = l.keys.Peek(key)
	}
	v := k.View(true)
	if len(v.Limits) == 0 {
		return nil
	}
	units := l.unitsOf(key)
	ls := make([]LimitState, len(v.Limits))
	for i, x := range v.Limits {
		ls[i] = LimitState{Unit: units[i], Window: x.Window, Remaining: x.Remaining}
	}
	return ls
}

// SetRate changes key's rate while the Limiter runs: the waits queued on
// the key go at the new pace from now on (their turns follow from the
// key's state, so a change of pace moves them all at once), and the
// bucket keeps the units it holds now, up to the new burst (as a change
// of pace by a server's declared limit does). The key "" is the
// Limiter's own quota (WaitN on the Limiter), and For("").
//
// The rate lasts while the key is remembered: a key whose rate was set
// is not forgotten when idle, and one forgotten past MaxKeys gets its
// configured rate (Limit and Burst, or its entry of Overrides) back, so
// that memory stays bounded by MaxKeys.
//
// r's zero fields mean what they mean in [Rate]: the zero Rate is no
// limit, Limit 0 with a Burst lets no more through than the bucket holds,
// Burst 0 with a Limit is 1. A wait queued for more units than the new
// burst fails with [ErrCostExceedsBurst] only when it is made, not once
// queued: it goes when the bucket has gathered its units. A negative or
// NaN Limit, or a negative Burst, is refused with [ErrInvalidLimit] and
// changes nothing. SetRate never blocks on a wait and is safe for
// concurrent use.
func (l *Limiter) SetRate(key string, r Rate) error {
	if r.Limit < 0 || math.IsNaN(float64(r.Limit)) || r.Burst < 0 {
		return fmt.Errorf("throttle: SetRate(%q) with limit %v, burst %d: give a limit ≥ 0 (rate.Inf: none) and a burst ≥ 0: %w", key, r.Limit, r.Burst, ErrInvalidLimit)
	}
	l.bucket(key).k().SetRate(r.Limit, r.Burst)
	return nil
}

// The Limiter's own quota (the key ""), so that a Limiter is a waiter
// like a *rate.Limiter: each method is that of For("").

// WaitN waits for n units of the Limiter's own quota (the key ""), so that
// a Limiter is a [Waiter] like a *rate.Limiter.
func (l *Limiter) WaitN(ctx context.Context, n int) error { return l.bucket("").WaitN(ctx, n) }

// WaitCost waits for c on the Limiter's own quota: see [CostWaiter].
func (l *Limiter) WaitCost(ctx context.Context, c Cost) error { return l.bucket("").WaitCost(ctx, c) }

// TryN spends n units of the Limiter's own quota now, or nothing: see
// [Trier].
func (l *Limiter) TryN(ctx context.Context, n int) (bool, time.Duration, error) {
	return l.bucket("").TryN(ctx, n)
}

// Allow spends one unit of the Limiter's own quota now, or nothing.
func (l *Limiter) Allow() bool { return l.bucket("").Allow() }

// ReserveN takes a turn for n units of the Limiter's own quota: see
// [Reservation].
func (l *Limiter) ReserveN(ctx context.Context, n int) (Reservation, error) {
	return l.bucket("").ReserveN(ctx, n)
}

// ReserveCost takes a turn for c on the Limiter's own quota: see
// [CostReserver].
func (l *Limiter) ReserveCost(ctx context.Context, c Cost) (Reservation, error) {
	return l.bucket("").ReserveCost(ctx, c)
}

// Pause holds off every caller of the Limiter's own quota.
func (l *Limiter) Pause(ctx context.Context, d time.Duration) error {
	return l.bucket("").Pause(ctx, d)
}

// Settle amends the cost of a wait on the Limiter's own quota: see
// [Settler].
func (l *Limiter) Settle(ctx context.Context, spent, actual int) error {
	return l.bucket("").Settle(ctx, spent, actual)
}

// SettleCost amends a wait on the Limiter's own quota: see
// [CostSettler].
func (l *Limiter) SettleCost(ctx context.Context, spent, actual Cost) error {
	return l.bucket("").SettleCost(ctx, spent, actual)
}

// AcquireN waits until n units fit under the in-flight cap of the
// Limiter's own quota and takes them: see [Acquirer].
func (l *Limiter) AcquireN(ctx context.Context, n int) (func(), error) {
	return l.bucket("").AcquireN(ctx, n)
}
