package throttle

// Keys may come from user input, so a Limiter must not remember every key
// it has seen. A key whose state is that of a new key (see schedule.idle:
// full, nothing queued, held, cut or windowed, no units in flight under its
// in-flight cap) is forgotten without loss; past MaxKeys, keys are
// forgotten even if not idle (such a key gets a fresh burst, and a fresh
// in-flight cap), those with no sleeping waits and no units in flight
// first.
//
// Insertions of new keys and sweeps take one mutex, so the count of keys
// remembered never passes MaxKeys, however many goroutines insert at once.
// A sweep runs on the goroutine that adds a key, when the number of keys has
// doubled since the last sweep (from at least minSweep), or reached
// MaxKeys, so its cost is amortized over the insertions; no background
// goroutine is needed.

// minSweep is the number of keys below which no sweep runs.
const minSweep = 1024

// sweep forgets every idle bucket (losslessly), then, while the count is at
// MaxKeys, buckets with no sleeping waits, then any, down to 3/4 of
// MaxKeys. It requires l.insertMu.
func (l *Limiter) sweep() {
	maxKeys := l.maxKeys()
	now := l.now()
	for pass := range 3 {
		if pass > 0 && l.count.Load() < maxKeys {
			break
		}
		target := int64(0)
		if pass > 0 {
			target = maxKeys * 3 / 4
		}
		l.keys.Range(func(k, v any) bool {
			if v.(*bucket).forgetIf(now, pass) {
				l.keys.Delete(k)
				l.count.Add(-1)
			}
			return pass == 0 || l.count.Load() > target
		})
	}
	l.next = min(max(2*l.count.Load(), minSweep), maxKeys)
}

// forgetIf marks b dead and reports true if it is idle (pass 0), has no
// sleeping waits (pass 1), or in any case (pass 2).
func (b *bucket) forgetIf(now float64, pass int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advanceLocked(now) // forgets a window long past its reset
	switch {
	case pass == 0 && (!b.s.Idle(now, b.pacing) || b.inflight.busy()):
		// A key with units in flight, or waited for, is not idle: a
		// fresh key would forget them and let more than its cap in.
		return false
	case pass == 1 && b.inflight.held > 0:
		return false
	case pass == 1 && b.sleepers > 0:
		return false
	}
	b.dead = true
	return true
}
