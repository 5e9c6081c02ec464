package local

import "golang.org/x/time/rate"

// SetRate changes the key's first limit while it runs: the waits queued
// go at the new pace from now on, and the units the bucket holds now (at
// most its burst) are kept, at the new pace. A key whose rate was set is
// not forgotten while idle (a new one would have its configured rate);
// one forgotten past MaxKeys gets its configured rate back.
func (k *Key) SetRate(limit rate.Limit, burst int) {
	k = k.lock()
	defer k.mu.Unlock()
	now := k.ks.Now()
	k.advanceLocked(now) // what went at the old pace
	k.s.Repace(now, k.pacing)
	k.setRate(limit, burst)
	k.pinned = true
	k.advanceLocked(now) // rescale: the units kept at the new
	k.notifyLocked()
}
