package local

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/throttle-go/throttle/internal/schedule"
	"github.com/throttle-go/throttle/internal/strict"
	"golang.org/x/time/rate"
)

// The errors of a key's operations; the root package wraps them in its
// own.
var (
	// ErrCost: a cost larger than a limit holds at once.
	ErrCost = errors.New("cost exceeds what a limit holds at once")
	// ErrInvalid: a negative cost, or a key whose configuration is
	// invalid.
	ErrInvalid = errors.New("invalid cost or limit")
)

// Error is an operation's error: Err (ErrCost or ErrInvalid) and what
// the operation was.
type Error struct {
	Err error
	Msg string
}

func (e *Error) Error() string { return e.Msg + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

func errorf(err error, format string, args ...any) error {
	return &Error{Err: err, Msg: fmt.Sprintf(format, args...)}
}

// DeadlineError is a wait whose turn is past its context's deadline: it
// would have waited Delay.
type DeadlineError struct{ Delay time.Duration }

func (e *DeadlineError) Error() string { return "turn past the deadline" }

// QueueFullError is a wait of N units refused, with nothing kept, because
// it would have queued with Queued units already queued on a key that
// holds at most Max.
type QueueFullError struct{ N, Queued, Max int64 }

func (e *QueueFullError) Error() string { return "queue full" }

// Key is one key: its engine state and the waits sleeping on it. It is
// safe for concurrent use.
type Key struct {
	ks  *Keys
	key string
	own bool // a Limiter's own quota: never in the map, never forgotten

	mu        sync.Mutex // protects the fields below
	limit     rate.Limit // rate.Inf: no limit
	burst     int
	pinned    bool // the rate was set (SetRate), not configured: not idle
	pacing    schedule.Config
	s         schedule.State
	changed   chan struct{} // closed when turns may have moved; nil if no one sleeps
	sleepers  int           // waits sleeping on s
	dead      bool          // forgotten: new calls re-resolve through ks
	detached  bool          // made by For, not yet remembered: a change attaches it
	slots     slots         // the in-flight cap (inflight.go)
	strict    strict.Key    // the strict-server rules' state
	xzero     []float64     // a cost of nothing in the further limits (read-only)
	xerr      error         // the further limits' configuration error
	maxQueued int64         // the bound on the units queued (0: none)

	// The slow-down in force, for its end (decide.go).
	recovery  *time.Timer   // reports the cut's end; nil if none armed
	recoverTo func(Decided) // the last call's listener to tell, if any
}

// Owner returns the Config's Owner of the key's set.
func (k *Key) Owner() any { return k.ks.c.Owner }

// Name returns the key's name.
func (k *Key) Name() string { return k.key }

// lock locks the key and returns it, remembered: a key For made is
// remembered now (or the key of its name remembered meanwhile is
// returned), and a key that was forgotten is resolved again by name.
func (k *Key) lock() *Key {
	for {
		k.mu.Lock()
		if !k.dead && !k.detached {
			return k
		}
		detached := k.detached
		k.mu.Unlock()
		if detached {
			k = k.ks.attach(k)
		} else {
			k = k.ks.For(k.key)
		}
	}
}

// setRate sets the key's first limit. It requires k.mu, or k not yet
// shared.
func (k *Key) setRate(limit rate.Limit, burst int) {
	k.limit, k.burst = limit, burst
	if k.limit == 0 && k.burst == 0 {
		k.limit = rate.Inf // the zero rate: no limit
	}
	if k.burst == 0 {
		k.burst = 1
	}
	k.pacing = schedule.Config{Burst: float64(k.burst), Sec: 1e9}
	if k.limit != rate.Inf && k.limit >= 0 {
		// Limit 0 (x/time/rate's: the bucket never refills) and rates
		// too slow for a float's interval are paced at NeverInterval.
		k.pacing.Interval = min(1e9/float64(k.limit), NeverInterval)
	}
}

// NeverInterval is the pace, in ns per unit, of a bucket that does not
// refill (Limit 0): one unit per 3e233 years. It is finite, so that the
// schedule's arithmetic (p·interval − τ for any position p and burst)
// stays finite and exact where it matters: a position within the bucket
// goes now, one past it never does.
const NeverInterval = 1e250

// check validates a cost of n units of the first limit against the key's
// rate. It requires k.mu.
func (k *Key) check(n int) error {
	switch {
	case n < 0:
		return errorf(ErrInvalid, "wait for %d units of %q", n, k.key)
	case k.limit < 0 || k.burst < 0 || math.IsNaN(float64(k.limit)):
		return errorf(ErrInvalid, "%q has limit %v, burst %d", k.key, k.limit, k.burst)
	case k.pacing.Interval > 0 && n > k.burst:
		return errorf(ErrCost, "wait for %d units of %q, burst %d", n, k.key, k.burst)
	case k.xerr != nil:
		return k.xerr
	}
	return nil
}

// cost returns the cost in the further limits to use: cost, or nothing.
func (k *Key) cost(cost []float64) []float64 {
	if cost == nil {
		return k.xzero
	}
	return cost
}

// Rate returns the key's first limit.
func (k *Key) Rate() (rate.Limit, int) {
	k = k.lock()
	defer k.mu.Unlock()
	return k.limit, k.burst
}

// advanceLocked advances the key's state at now and wakes its sleepers
// if that moved their turns earlier. It requires k.mu.
func (k *Key) advanceLocked(now float64) {
	k.s.Advance(now, k.pacing)
	k.wakeIfSped()
}

// wakeIfSped wakes the key's sleepers if the schedule moved turns earlier
// since it was last asked. It requires k.mu.
func (k *Key) wakeIfSped() {
	if k.s.Sped() {
		k.notifyLocked()
	}
}

// changedLocked returns a channel closed at the next change of the key's
// state. It requires k.mu.
func (k *Key) changedLocked() <-chan struct{} {
	if k.changed == nil {
		k.changed = make(chan struct{})
	}
	return k.changed
}

// notifyLocked wakes every sleeping wait to ask for its turn again. It
// requires k.mu.
func (k *Key) notifyLocked() {
	if k.changed != nil {
		close(k.changed)
		k.changed = nil
	}
}

// forgetIf marks the key dead and reports true if it may be forgotten in
// the sweep's pass: 0, only if idle; 1, if nothing is held in flight and
// no wait sleeps; 2, any.
func (k *Key) forgetIf(now float64, pass int) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.advanceLocked(now) // forgets a window long past its reset
	switch {
	case pass == 0 && (!k.s.Idle(now, k.pacing) || k.slots.busy() || k.pinned):
		// A key with units in flight, or waited for, is not idle: a
		// fresh key would forget them and let more than its cap in. Nor
		// is one whose rate was set: a fresh key has its configured one.
		return false
	case pass == 1 && k.slots.held > 0:
		return false
	case pass == 1 && k.sleepers > 0:
		return false
	}
	k.dead = true
	return true
}

// Duration converts a span of schedule time to a Duration, rounded up and
// saturated: a pace slower than one unit per 292 years still waits (for
// ever, in effect) instead of overflowing to no wait at all.
func Duration(ns float64) time.Duration {
	if ns >= math.MaxInt64 {
		return math.MaxInt64
	}
	if ns <= 0 || math.IsNaN(ns) {
		return 0
	}
	return time.Duration(math.Ceil(ns))
}

// Configured reports whether the key's first limit has a pace configured
// (else a server's declared limit paces it).
func (k *Key) Configured() bool {
	k = k.lock()
	defer k.mu.Unlock()
	return k.pacing.Interval > 0
}
