// Package local keeps the in-process Limiter's keys: each key's engine
// state (internal/schedule) behind a lock, the waits sleeping on it, its
// in-flight slots, its strict-server rules (internal/strict), and the map
// of keys with its bound. What it decides is per key and per process;
// the rules it applies are the engine's, the same a fleet's keys follow
// through Redis, and the strict-server rules, which only the in-process
// Limiter keeps.
//
// Its API is in the engine's terms (units, queues, costs in the further
// limits as a vector) and time.Duration; the root package turns it into
// the public contract (errors, events, State).
package local

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/throttle-go/throttle/internal/schedule"
	"golang.org/x/time/rate"
)

// KeyConfig is a new key's configuration.
type KeyConfig struct {
	// Limit and Burst: the first limit, a token bucket (rate.Inf: no
	// limit; Limit 0 with a Burst: Burst units, then none).
	Limit rate.Limit
	Burst int
	// Limits are the further limits, each in a unit of its own (nil:
	// none), and Err the error of an invalid configuration of them: every
	// wait fails with it.
	Limits []schedule.Limit
	Err    error
	// InFlight caps the units held at once (0: no cap).
	InFlight int64
	// MaxQueued bounds the units the key's waits may hold queued (0: no
	// bound): see schedule.Wait.
	MaxQueued int64
}

// Config is a set of keys' configuration.
type Config struct {
	// MaxKeys bounds the keys remembered at once.
	MaxKeys int64
	// Key returns a new key's configuration.
	Key func(key string) KeyConfig
	// Owner is the value the keys belong to (the root package's
	// Limiter), for Key.Owner.
	Owner any
	// Decided, if not nil, is told of every decision a key takes by
	// itself (an event), after the key's lock is released.
	Decided func(key string, d Decided)
}

// Keys is a set of keys, created on first use and forgotten when idle:
// at most MaxKeys are remembered. It is safe for concurrent use.
type Keys struct {
	c     Config
	epoch time.Time // time zero of the schedules; monotonic

	m        sync.Map     // string -> *Key
	count    atomic.Int64 // entries in m
	insertMu sync.Mutex   // serializes insertions and sweeps, so count never passes MaxKeys
	next     int64        // count at which the next sweep runs; insertMu
}

// New returns an empty set of keys.
func New(c Config) *Keys {
	return &Keys{c: c, epoch: time.Now(), next: min(MinSweep, c.MaxKeys)}
}

// Now returns the schedules' time now: nanoseconds since the set was
// made, from the monotonic clock.
func (ks *Keys) Now() float64 {
	return float64(time.Since(ks.epoch))
}

// Epoch returns the schedules' time zero.
func (ks *Keys) Epoch() time.Time { return ks.epoch }

// Len reports how many keys are remembered now.
func (ks *Keys) Len() int { return int(ks.count.Load()) }

// For returns key: the one remembered, or a new key, which is
// remembered once an operation changes it (reading its state does not).
func (ks *Keys) For(key string) *Key {
	if v, ok := ks.m.Load(key); ok {
		return v.(*Key)
	}
	k := ks.newKey(key)
	k.detached = true
	return k
}

// attach remembers k, a key For made, and returns it; or the key of its
// name remembered meanwhile.
func (ks *Keys) attach(k *Key) *Key {
	ks.insertMu.Lock()
	defer ks.insertMu.Unlock()
	if v, ok := ks.m.Load(k.key); ok {
		return v.(*Key)
	}
	if ks.count.Load() >= ks.next {
		ks.sweep()
	}
	k.mu.Lock()
	k.detached = false
	k.mu.Unlock()
	ks.m.Store(k.key, k)
	ks.count.Add(1)
	return k
}

// Lookup returns key if it is remembered.
func (ks *Keys) Lookup(key string) (*Key, bool) {
	v, ok := ks.m.Load(key)
	if !ok {
		return nil, false
	}
	return v.(*Key), true
}

// Range calls f for each key remembered, in no particular order, until
// f returns false. A key remembered or forgotten while Range runs may or
// may not be seen; each key is seen at most once. It takes no lock: f
// may call any method of the set.
func (ks *Keys) Range(f func(k *Key) bool) {
	ks.m.Range(func(_, v any) bool { return f(v.(*Key)) })
}

// Own returns a key that is not in the set and never forgotten (a
// Limiter's own quota).
func (ks *Keys) Own(key string) *Key {
	k := ks.newKey(key)
	k.own = true
	return k
}

func (ks *Keys) newKey(key string) *Key {
	c := ks.c.Key(key)
	k := &Key{ks: ks, key: key, xerr: c.Err}
	k.setRate(c.Limit, c.Burst)
	k.slots.limit = c.InFlight
	k.maxQueued = c.MaxQueued
	var lim []schedule.Limit
	if c.Limits != nil {
		lim = append([]schedule.Limit(nil), c.Limits...)
		k.xzero = make([]float64, len(lim))
	}
	k.s.Init(lim)
	return k
}

// MinSweep: the map is swept when it has this many keys, at the least.
const MinSweep = 1024

// sweep forgets keys: first every idle key (one whose state is that of a
// new key, so that forgetting it loses nothing); then, while still at
// MaxKeys, down to three quarters of it, keys with nothing in flight and
// no wait sleeping first, then any. A forgotten key's waits re-resolve
// through the map. The next sweep runs when the map doubles. It requires
// insertMu.
func (ks *Keys) sweep() {
	maxKeys := ks.c.MaxKeys
	now := ks.Now()
	for pass := range 3 {
		if pass > 0 && ks.count.Load() < maxKeys {
			break
		}
		target := int64(0)
		if pass > 0 {
			target = maxKeys * 3 / 4
		}
		ks.m.Range(func(name, v any) bool {
			if v.(*Key).forgetIf(now, pass) {
				ks.m.Delete(name)
				ks.count.Add(-1)
			}
			return pass == 0 || ks.count.Load() > target
		})
	}
	ks.next = min(max(2*ks.count.Load(), MinSweep), maxKeys)
}
