package throttle

import (
	"context"
	"fmt"
	"iter"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/throttle-go/throttle/internal/local"
	"github.com/throttle-go/throttle/internal/schedule"
	"golang.org/x/time/rate"
)

// Limiter keeps a quota per key (a host, an API key, a tenant, a route)
// in this process. Most programs want one:
//
//	lim := &throttle.Limiter{Limits: []throttle.Limit{{Rate: 10, Burst: 5}}}
//	err := lim.For("api.github.com").Wait(ctx)
//
// Most callers use it through [Transport], or call Wait on For(key) before
// each job that spends the quota. For returns a [Quota]: every operation
// on a key, with the guarantees stated there.
//
// A key's limits are its Limits (or its entry of Overrides): token
// buckets and windows, in the unit waits count and in units of their own
// (tokens). A key also paces itself by what servers say ([Quota].Observe,
// which a Transport calls): it honours pauses, spreads a window that runs
// low, adopts a server's declared limit where none is configured, slows
// down on bare refusals, and, under a configured limit one unit deep,
// reads its responses' round trips against a server that leaves no slack
// (see the package doc for which of these decisions are per process and
// which a fleet shares).
//
// Memory is bounded however many distinct keys arrive: a key whose state
// is that of a new key (its limits full, nothing queued, paused, cut or
// windowed, nothing in flight) is forgotten losslessly when the keys are
// swept; past MaxKeys, keys are forgotten even if not idle, those with
// units in flight last. Never more than MaxKeys are remembered.
//
// What a key decides by itself (a slow-down and its end, queued turns
// moved later, a window learned, a declared pace adopted) is reported to
// OnEvent, and to the function of the call's context ([WithEvents]),
// which is a [Transport]'s OnEvent for the calls a Transport makes.
//
// The zero Limiter has no limit: it only honours pauses and what servers
// say. Set the fields before the first call and do not change them
// after (change a key's rate with [Limiter.SetRate]). A Limiter is safe
// for concurrent use.
type Limiter struct {
	// Limits are every key's limits that has no entry in Overrides. A
	// wait spends its cost on all of them at once or on none: a limit of
	// Unit "" counts the units WaitN counts (a Cost's N), a limit of
	// another unit the units a Cost names. Nil means no limit (pauses and
	// what servers say still apply). An invalid limit is an error on
	// every wait of the keys it applies to.
	Limits []Limit

	// Overrides sets other limits for particular keys, in the form the
	// key function gives them: e.g. {"api.github.com": {{Rate: 1, Burst:
	// 1}}}. An entry replaces Limits for its key (an empty one: no
	// limit). Nil means none.
	Overrides map[string][]Limit

	// InFlight caps the units each key without an InFlightOverrides entry
	// may hold at once through [Quota].Acquire, e.g. 100 for GitHub's
	// concurrent requests: [Transport] holds a request's cost from before
	// its wait for quota until its response body is closed or read to the
	// end. Zero means no cap; negative is taken as zero.
	InFlight int

	// InFlightOverrides sets a different in-flight cap for particular
	// keys, as Overrides does for limits; an entry of 0 means no cap for
	// that key. Nil means none.
	InFlightOverrides map[string]int

	// MaxQueued bounds the units each key's waits may hold queued, the
	// key's queue, e.g. 20: a wait (or reservation) that would queue (it
	// cannot go at once) and take the units queued past it fails at once
	// with an error matching [ErrQueueFull], spends nothing, and is
	// reported as an [EventQueueFull]; the waits queued keep their
	// turns. It bounds the goroutines and memory a spike piles up where a
	// deadline alone would not. A wait of more units than MaxQueued never
	// queues. Try and Allow never queue. Zero means no bound; negative is
	// taken as zero.
	MaxQueued int

	// MaxKeys bounds how many keys are remembered at once. Zero means 1<<20.
	MaxKeys int

	// OnEvent, if not nil, is told of every decision a key takes by
	// itself from what servers said (see [Quota].Observe): a slow-down
	// (EventSlowDown) and its end (EventRecovered), queued turns moved
	// later (EventShift), a window learned (EventWindow), a declared pace
	// adopted (EventDeclared), an acquisition that blocked on a key's
	// in-flight cap (EventInFlight), a settle's charge clamped
	// (EventClamp), a wait refused by MaxQueued (EventQueueFull). It is
	// for programs that use the Limiter without a [Transport] (queue
	// workers); a Transport's OnEvent gets
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
	keys  *local.Keys          // the keys
	def   *local.Key           // the Limiter's own quota (WaitN on the Limiter)
	conf  keyLimits            // Limits as the keys keep them
	confs map[string]keyLimits // Overrides as the keys keep them
}

func (l *Limiter) init() {
	l.keys = local.New(local.Config{MaxKeys: l.maxKeys(), Key: l.keyConfig, Owner: l, Decided: l.decided})
	epoch := l.keys.Epoch()
	l.conf = limitsOf(l.Limits, epoch)
	l.confs = make(map[string]keyLimits, len(l.Overrides))
	for k, ls := range l.Overrides {
		l.confs[k] = limitsOf(ls, epoch)
	}
	l.def = l.keys.Own("")
}

// Check reports, once at setup, a configuration no wait can use: an
// invalid Limit in Limits or in any key's Overrides (an error matching
// [ErrInvalidLimit] that says which), where each operation of such a key
// would fail with it. It returns nil for a valid configuration; ctx is
// for the distributed Limiter's Check, which asks Redis, and is not used.
func (l *Limiter) Check(ctx context.Context) error {
	l.once.Do(l.init)
	if l.conf.err != nil {
		return l.conf.err
	}
	for _, k := range slices.Sorted(maps.Keys(l.confs)) {
		if err := l.confs[k].err; err != nil {
			return fmt.Errorf("throttle: Overrides[%q]: %w", k, err)
		}
	}
	return nil
}

func (l *Limiter) maxKeys() int64 {
	if l.MaxKeys > 0 {
		return int64(l.MaxKeys)
	}
	return 1 << 20
}

// limits returns key's limits as the keys keep them.
func (l *Limiter) limits(key string) *keyLimits {
	if c, ok := l.confs[key]; ok {
		return &c
	}
	return &l.conf
}

// keyConfig returns a new key's configuration.
func (l *Limiter) keyConfig(key string) local.KeyConfig {
	c := l.limits(key)
	k := local.KeyConfig{Limit: c.rate, Burst: c.burst, Limits: c.lim, Err: c.err, InFlight: int64(max(l.InFlight, 0)), MaxQueued: int64(max(l.MaxQueued, 0))}
	if v, ok := l.InFlightOverrides[key]; ok {
		k.InFlight = int64(max(v, 0))
	}
	return k
}

// decided tells OnEvent of a decision a key took from no call (a
// slow-down's end).
func (l *Limiter) decided(key string, d local.Decided) {
	if l.OnEvent != nil {
		l.OnEvent(eventOf(l, key, d))
	}
}

// key returns key's quota; "" is the Limiter's own.
func (l *Limiter) key(key string) *limiterKey {
	l.once.Do(l.init)
	if key == "" {
		return (*limiterKey)(l.def)
	}
	return (*limiterKey)(l.keys.For(key))
}

// For returns key's quota: see [Quota]. The key "" is the Limiter's own
// quota, WaitN's. For allocates only the first time a key is seen (or
// seen again after it was forgotten).
func (l *Limiter) For(key string) Quota { return l.key(key) }

// WaitN waits for n units of the Limiter's own quota (the key ""), so
// that a Limiter is a [Waiter] as a *rate.Limiter is.
func (l *Limiter) WaitN(ctx context.Context, n int) error { return l.key("").WaitN(ctx, n) }

// All yields the keys the Limiter remembers now, each with its quota
// (For's), in no particular order: the Limiter's own quota (the key "")
// is not among them. A key remembered or forgotten while the loop runs
// may or may not be yielded; none is yielded twice. It allocates nothing
// per key and holds no lock while the loop's body runs, which may call
// the Limiter and the quota (State, to show a key).
func (l *Limiter) All() iter.Seq2[string, Quota] {
	return func(yield func(string, Quota) bool) {
		l.once.Do(l.init)
		l.keys.Range(func(k *local.Key) bool { return yield(k.Name(), (*limiterKey)(k)) })
	}
}

// Len reports how many keys the Limiter remembers now.
func (l *Limiter) Len() int {
	l.once.Do(l.init)
	return l.keys.Len()
}

// now returns the keys' time now, in ns.
func (l *Limiter) now() float64 {
	l.once.Do(l.init)
	return l.keys.Now()
}

// SetRate changes key's first token bucket (its first limit of Unit ""
// with a Rate) while the Limiter runs: the waits queued on the key go at
// the new pace from now on, and the bucket keeps the units it holds now,
// up to the new burst. A key with no such limit gets one. The key "" is
// the Limiter's own quota.
//
// The rate lasts while the key is remembered: a key whose rate was set
// is not forgotten when idle, and one forgotten past MaxKeys gets its
// configured limits back, so that memory stays bounded by MaxKeys.
//
// r and burst mean what they mean in a [Limit]: rate.Inf is no limit,
// Rate 0 with a burst lets no more through than the bucket holds, burst
// 0 is 1. A wait queued for more units than the new burst goes when the
// bucket has gathered them. A negative or NaN rate, or a negative burst,
// is refused with [ErrInvalidLimit] and changes nothing.
func (l *Limiter) SetRate(key string, r rate.Limit, burst int) error {
	if r < 0 || math.IsNaN(float64(r)) || burst < 0 {
		return fmt.Errorf("throttle: SetRate(%q) with rate %v, burst %d: give a rate ≥ 0 (rate.Inf: none) and a burst ≥ 0: %w", key, r, burst, ErrInvalidLimit)
	}
	l.key(key).k().SetRate(r, burst)
	return nil
}

// keyLimits are a key's limits as its state keeps them: the first token
// bucket of the unit waits count as the engine's first limit, every other
// limit a further limit, with its unit.
type keyLimits struct {
	rate  rate.Limit // the first bucket (rate.Inf: none)
	burst int
	lim   []schedule.Limit // the further limits (nil: none)
	units []string         // their units ("" for the unit waits count)
	err   error            // a limit no wait can use
}

// limitsOf converts ls to the limits a key keeps; windows are aligned to
// the Unix epoch, and the keys' times count from epoch.
func limitsOf(ls []Limit, epoch time.Time) keyLimits {
	c := keyLimits{rate: rate.Inf}
	first := true
	for _, l := range ls {
		if err := l.check(); err != nil {
			return keyLimits{rate: rate.Inf, err: err}
		}
		if l.bucket() && l.Rate != rate.Inf {
			if first && l.Unit == "" {
				c.rate, c.burst, first = l.Rate, l.Burst, false
			} else {
				c.lim = append(c.lim, schedule.BucketLimit(min(1e9/float64(l.Rate), local.NeverInterval), float64(max(l.Burst, 1))))
				c.units = append(c.units, l.Unit)
			}
		}
		if l.window() {
			kind := schedule.KindFixed
			switch l.Kind {
			case Sliding:
				kind = schedule.KindSliding
			case SlidingLog:
				kind = schedule.KindLog
			case FromFirstUse:
				kind = schedule.KindFirst
			}
			off := float64(epoch.UnixNano() % int64(l.Per))
			c.lim = append(c.lim, schedule.WindowLimit(kind, float64(l.Per), float64(l.Count), off))
			c.units = append(c.units, l.Unit)
		}
	}
	if c.rate == rate.Inf {
		c.rate, c.burst = 0, 0 // the zero rate: no limit
	}
	return c
}
