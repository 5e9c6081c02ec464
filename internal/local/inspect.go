package local

import (
	"github.com/throttle-go/throttle/internal/schedule"
	"github.com/throttle-go/throttle/internal/strict"
)

// Held returns the units the key holds in flight now.
func (k *Key) Held() int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.slots.held
}

// Inspect calls f with the key's state, its configuration and its
// strict-server rules' state, under the key's lock, after advancing the
// state to now: for tests that read or seed what the key keeps. f must
// not call the key.
func (k *Key) Inspect(f func(now float64, s *schedule.State, c schedule.Config, st *strict.Key)) {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.ks.Now()
	k.advanceLocked(now)
	f(now, &k.s, k.pacing, &k.strict)
}
