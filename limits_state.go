package throttle

import (
	"github.com/throttle-go/throttle/internal/schedule"
)

// LimitState is one of a key's further limits ([Limiter.Limits]) as
// [Limiter.LimitStates] shows it. (The key's [State] is its first
// limit's, but for Next, which counts every limit.)
type LimitState struct {
	// Unit is the limit's unit; Window reports a window (else a bucket).
	Unit   string
	Window bool
	// Remaining is how many of its units a wait could spend at once now,
	// once the waits queued have spent theirs (a bucket's level, what a
	// window has left; negative while queued waits owe more than it
	// holds): x/time/rate's Tokens for this limit.
	Remaining float64
}

// LimitStates returns the state of key's further limits now
// ([Limiter.Limits], in their order; a limit with both a Rate and a
// Window shows as two), without creating the key; nil if it has none.
func (l *Limiter) LimitStates(key string) []LimitState {
	l.once.Do(l.init)
	b := l.def
	if key != "" {
		v, ok := l.keys.Load(key)
		if !ok {
			l.insertMu.Lock()
			b = l.newBucket(key) // not stored
			l.insertMu.Unlock()
		} else {
			b = v.(*bucket)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.l.now()
	b.advanceLocked(now)
	var views []schedule.LimitView
	b.s.LimitsView(now, b.pacing, &views)
	if len(views) == 0 {
		return nil
	}
	ls := make([]LimitState, len(views))
	for i, v := range views {
		ls[i] = LimitState{Unit: b.xunits[i], Window: v.Window, Remaining: v.Remaining}
	}
	return ls
}
