package throttle

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/throttle-go/throttle/internal/schedule"
	"github.com/throttle-go/throttle/internal/strict"
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
// most a tenth of an interval; see anchor.go).
// A turn is never stored: it follows from the key's state whenever it is
// asked for, so that pauses, slow-downs and refunds move every queued turn
// at once (see schedule.go for the model and its invariants).
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

	once     sync.Once
	epoch    time.Time          // time zero of the schedules; monotonic
	rates    map[string]Rate    // copy of Overrides and SetRate's rates; insertMu after once
	caps     map[string]int     // copy of InFlightOverrides
	keys     sync.Map           // string -> *bucket
	count    atomic.Int64       // entries in keys
	insertMu sync.Mutex         // serializes insertions and sweeps, so count never passes MaxKeys
	next     int64              // count at which the next sweep runs; insertMu
	def      *bucket            // the bucket of WaitN on the Limiter itself
	xlim     []schedule.Limit   // Limits as the schedule keeps them; each key a copy
	xunits   []string           // their units
	xerr     error              // Limits invalid: every wait fails with it
	xkeys    map[string]xconfig // LimitsOverrides as the schedule keeps them
}

// xconfig is a key's further limits as the schedule keeps them.
type xconfig struct {
	lim   []schedule.Limit
	units []string
	err   error
}

// bucket is one key's schedule and the waits sleeping on it.
type bucket struct {
	l   *Limiter
	key string

	mu       sync.Mutex // protects the fields below
	limit    rate.Limit // rate.Inf: no limit
	burst    int
	pacing   schedule.Config
	s        schedule.State // the key's state
	changed  chan struct{}  // closed when turns may have moved; nil if no one sleeps
	sleepers int            // waits sleeping on s
	dead     bool           // forgotten by l: new waits re-resolve through l
	inflight slots          // the in-flight cap (inflight.go)
	strict   strict.Key     // the strict-server rules' state (internal/strict)
	xunits   []string       // the units of s.x's limits (l.xunits)
	xcost    []float64      // a wait's cost in them, converted under mu
	xerr     error          // l.xerr

	// The slow-down in force, for EventRecovered (see events_limiter.go).
	recovery  *time.Timer // reports the cut's end; nil if none armed
	recoverTo func(Event) // the last Transport's OnEvent to tell, if any
}

func (l *Limiter) init() {
	l.epoch = time.Now()
	l.rates = make(map[string]Rate, len(l.Overrides))
	for k, r := range l.Overrides {
		l.rates[k] = r
	}
	l.caps = make(map[string]int, len(l.InFlightOverrides))
	for k, c := range l.InFlightOverrides {
		l.caps[k] = c
	}
	l.next = min(minSweep, l.maxKeys())
	l.xlim, l.xunits, l.xerr = l.xlimits(l.Limits)
	l.xkeys = make(map[string]xconfig, len(l.LimitsOverrides))
	for k, u := range l.LimitsOverrides {
		var x xconfig
		x.lim, x.units, x.err = l.xlimits(u)
		l.xkeys[k] = x
	}
	l.def = l.newBucket("")
}

func (l *Limiter) maxKeys() int64 {
	if l.MaxKeys > 0 {
		return int64(l.MaxKeys)
	}
	return 1 << 20
}

func (l *Limiter) newBucket(key string) *bucket {
	r, ok := l.rates[key]
	if !ok {
		r = Rate{Limit: l.Limit, Burst: l.Burst}
	}
	b := &bucket{l: l, key: key}
	b.setRate(r)
	b.inflight.limit = int64(l.inFlight(key))
	x := xconfig{l.xlim, l.xunits, l.xerr}
	if o, ok := l.xkeys[key]; ok {
		x = o
	}
	var lim []schedule.Limit
	if x.lim != nil {
		lim = append([]schedule.Limit(nil), x.lim...)
		b.xunits, b.xcost = x.units, make([]float64, len(x.lim))
	}
	b.s.Init(lim)
	b.xerr = x.err
	return b
}

// WaitN waits for n units of the Limiter's own quota (the key ""), so that
// a Limiter is a [Waiter] like a *rate.Limiter.
func (l *Limiter) WaitN(ctx context.Context, n int) error {
	l.once.Do(l.init)
	return l.def.WaitN(ctx, n)
}

// For returns the waiter of key's quota; it also implements [Pauser],
// [Adapter], [RetryWaiter], [Trier], [Reserver], [Inspector] and
// [Settler] and [Acquirer] (the key's in-flight cap: see InFlight). For
// allocates only the first time a key is seen (or seen again after it was
// forgotten).
func (l *Limiter) For(key string) Waiter {
	return l.bucket(key)
}

func (l *Limiter) bucket(key string) *bucket {
	l.once.Do(l.init)
	if v, ok := l.keys.Load(key); ok {
		return v.(*bucket)
	}
	l.insertMu.Lock()
	defer l.insertMu.Unlock()
	if v, ok := l.keys.Load(key); ok {
		return v.(*bucket)
	}
	if l.count.Load() >= l.next {
		l.sweep()
	}
	b := l.newBucket(key)
	l.keys.Store(key, b)
	l.count.Add(1)
	return b
}

// now returns the time since l.epoch in nanoseconds, read from the
// monotonic clock.
func (l *Limiter) now() float64 {
	return float64(time.Since(l.epoch))
}

// duration converts a span of schedule time to a Duration, rounded up and
// saturated: a pace slower than one unit per 292 years still waits (for
// ever, in effect) instead of overflowing to no wait at all.
func duration(ns float64) time.Duration {
	if ns >= math.MaxInt64 {
		return math.MaxInt64
	}
	if ns <= 0 || math.IsNaN(ns) {
		return 0
	}
	return time.Duration(math.Ceil(ns))
}

// Pause holds off every caller of the key until d from now: the queued
// waits included, which then go at the key's pace from the pause's end (a
// burst at most at once). A pause never shortens a longer one. It does not
// block and never fails.
func (b *bucket) Pause(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	b.mu.Lock()
	if b.dead {
		b.mu.Unlock()
		return b.l.bucket(b.key).Pause(ctx, d)
	}
	now := b.l.now()
	b.advanceLocked(now)
	sink := sinkFrom(ctx)
	var w schedule.Watch
	listen := b.listening(sink)
	if listen {
		w = b.watchLocked(now, false)
	}
	var ev decided
	if b.s.Pause(now + float64(d)) {
		if listen {
			ev = b.decideLocked(now, w, sink)
		}
		b.notifyLocked()
	}
	b.mu.Unlock()
	ev.emit(b.l.OnEvent, sink)
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

// adapt is Adapt; it reports whether f was a bare refusal of the strict
// server's timing, which left the pace as it was (anchor.go: jitter), and
// the pause it set when that is shorter than f's (a learned budget's
// refused probe: schedule_budget.go), else f.Pause.
func (b *bucket) adapt(ctx context.Context, f Feedback) (timing bool, pause time.Duration) {
	pause = f.Pause
	b.mu.Lock()
	if b.dead {
		b.mu.Unlock()
		return b.l.bucket(b.key).adapt(ctx, f)
	}
	now := b.l.now()
	s := &b.s
	b.advanceLocked(now)
	sink := sinkFrom(ctx)
	var w schedule.Watch
	listen := b.listening(sink)
	if listen {
		w = b.watchLocked(now, f.Throttled)
	}
	units := float64(max(f.Cost, 1))
	s.Answered(units)
	moved := false
	sent := now - float64(max(f.Age, 0))
	if f.Pause > 0 {
		until := now + float64(f.Pause)
		if f.Refused && !f.HasRemaining && !f.HasDeclared && !f.HasAvailable {
			// A refusal that says only when to come back: a hidden
			// budget's cycle (schedule_budget.go).
			var m bool
			until, m = s.BudgetRefused(now, sent, units, float64(f.Pause), b.pacing)
			moved = m
			pause = min(pause, time.Duration(math.Ceil(until-now)))
		}
		if s.Pause(until) {
			moved = true
		}
		if f.Refused && s.Refused(now, b.pacing) {
			moved = true
		}
	}
	if f.Accepted && s.BudgetAccepted(now, sent, b.pacing) {
		moved = true
	}
	if f.HasDeclared && b.pacing.Interval == 0 && f.DeclaredRate > 0 && f.DeclaredRate != rate.Inf && !math.IsNaN(float64(f.DeclaredRate)) {
		s.Declare(now, b.pacing, 1e9/float64(f.DeclaredRate), float64(max(f.DeclaredBurst, 1)))
		moved = true
	}
	if f.HasRemaining && !math.IsNaN(f.Remaining) && !math.IsNaN(f.Size) {
		s.Window(now, max(f.Remaining, 0), float64(max(f.Reset, 0)), max(f.Size, 0), float64(max(f.Window, 0)), b.pacing)
		moved = true
	}
	if f.HasAvailable && !math.IsNaN(f.Available) && s.Level(now, b.pacing, f.Available) {
		moved = true
	}
	k := &b.strict
	k.RoundTrip(float64(f.Age))
	if !f.Refused && !f.Throttled && f.Pause == 0 && k.Took(s, now, b.pacing, float64(f.Age)) {
		moved = true
	}
	switch {
	case f.Throttled && k.Timing(s, now, b.pacing, sent):
		// A refusal of the strict server's timing: the pace stays
		// (internal/strict).
		timing = true
	case f.Throttled:
		k.Refused()
		if s.Reject(now, sent, units, b.pacing) {
			moved = true
		}
	case f.Refused:
		k.Refused()
	default:
		k.Answered(units)
	}
	var ev decided
	if moved {
		if listen {
			ev = b.decideLocked(now, w, sink)
		}
		b.notifyLocked()
	}
	b.mu.Unlock()
	ev.emit(b.l.OnEvent, sink)
	return timing, pause
}

// Pause holds off every caller of the Limiter's own quota (key "").
func (l *Limiter) Pause(ctx context.Context, d time.Duration) error {
	l.once.Do(l.init)
	return l.def.Pause(ctx, d)
}

// Len reports how many keys the Limiter remembers now.
func (l *Limiter) Len() int {
	return int(l.count.Load())
}
