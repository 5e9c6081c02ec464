package throttle

// Keys may come from user input, so a Limiter must not remember every key
// it has seen. A bucket that is full again and not paused (and holds no
// server window or adaptive cut) is indistinguishable from a new one, so
// forgetting it loses nothing: sweeps forget those first. Past MaxKeys,
// buckets are forgotten even if not full (such a key gets a fresh burst).
//
// A sweep runs on the goroutine that adds a key, when the number of keys
// has doubled since the last sweep (from at least minSweep), so its cost is
// amortized over the insertions; no background goroutine is needed.

// minSweep is the number of keys below which no sweep runs.
const minSweep = 1024

// sweep forgets every full, unpaused bucket (losslessly), then, while more
// than MaxKeys remain, any bucket. The next sweep runs when the count has
// doubled, so the cost is amortized over the insertions.
func (l *Limiter) sweep() {
	if !l.sweepMu.TryLock() {
		return // another goroutine is sweeping
	}
	defer l.sweepMu.Unlock()
	maxKeys := int64(l.MaxKeys)
	if maxKeys <= 0 {
		maxKeys = 1 << 20
	}
	now := l.now()
	l.keys.Range(func(k, v any) bool {
		if b := v.(*bucket); b.forgetIf(now, false) {
			l.keys.CompareAndDelete(k, v)
			l.count.Add(-1)
		}
		return true
	})
	if l.count.Load() >= maxKeys {
		target := maxKeys * 3 / 4
		l.keys.Range(func(k, v any) bool {
			if v.(*bucket).forgetIf(now, true) {
				l.keys.CompareAndDelete(k, v)
				l.count.Add(-1)
			}
			return l.count.Load() > target
		})
	}
	l.next.Store(min(max(2*l.count.Load(), minSweep), maxKeys))
}

// forgetIf marks b dead and reports true if it is full and not paused, or
// if force is set.
func (b *bucket) forgetIf(now float64, force bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !force && (b.tat > now || b.paused > now || b.srv.holds(now)) {
		return false
	}
	b.dead = true
	return true
}

// holds reports whether s still matters at now: a cut in force, or a
// server window not yet reset. A nil s holds nothing.
func (s *serverState) holds(now float64) bool {
	return s != nil && (s.adapt.active || (s.win.valid && s.win.reset > now))
}
