package throttle

import (
	"context"
	"time"

	"golang.org/x/time/rate"
)

// State is a read-only view of one key's quota at one instant: what a
// wait would meet. Durations are from that instant (At), so that no
// clock other than the waiter's own is involved (a shared quota's is the
// store's).
type State struct {
	// At is when the view was taken, by this process's clock.
	At time.Time

	// Tokens is what the bucket holds, less the units queued, as
	// x/time/rate's Limiter.Tokens (negative while waits are queued
	// beyond it); +Inf with no pace in force.
	Tokens float64

	// Remaining is how many units waits of one unit each could take at
	// once now: 0 while paused or while waits are queued, at most what
	// the bucket and the server's window allow; +Inf with no limit.
	Remaining float64

	// Next is how long until a wait of one unit would go: 0 if at once.
	Next time.Duration

	// Paused is how long the pause in force has left; 0 if none.
	Paused time.Duration

	// Queued is the units of the waits queued (reservations included).
	Queued int64

	// Limit is the pace in force in units per second: the configured
	// rate, or the one a server declared (Declared), or the slow-down
	// after rejections (Cut); rate.Inf for none. Burst is the bucket's
	// depth in units at that pace.
	Limit rate.Limit
	Burst float64
	// Cut reports a slow-down after bare rejections in force: a cut, or a
	// trim of the limit by the margin a strict server needs.
	Cut bool
	// Declared reports that Limit is a server's declared limit (the key
	// has none configured).
	Declared bool

	// Window reports a server's window in force: WindowLeft units may go
	// until WindowReset from now (after the reset, probes go until a
	// response tells the next window).
	Window      bool
	WindowLeft  float64
	WindowReset time.Duration
}

// Inspector is a Waiter that shows a key's state. State reads it and
// changes nothing: it creates no state for a key that has none, extends
// no expiry, and queues nothing. The keys of [Limiter] and of
// distributed.Quota implement it.
type Inspector interface {
	State(ctx context.Context) (State, error)
}

// State returns the key's state now: see [State]. It never fails for a
// Limiter's key.
func (b *bucket) State(ctx context.Context) (State, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	at := time.Now()
	now := b.l.now()
	// advance only lets go what has gone already (it is how the state is
	// read lazily): the view is that of any call at now.
	b.advanceLocked(now)
	return b.state(now, at), nil
}

// state converts the schedule's view at now to a State taken at at. It
// requires b.mu, after advance.
func (b *bucket) state(now float64, at time.Time) State {
	v := b.s.View(now, b.pacing)
	// A wait of one unit goes after every queued wait, whichever limit
	// holds them (FIFO).
	next := max(v.Next, b.s.LimitsView(now, b.pacing, nil))
	st := State{
		At:        at,
		Tokens:    v.Tokens,
		Remaining: v.Remaining,
		Next:      duration(next - now),
		Paused:    duration(v.Hold - now),
		Queued:    int64(v.Queued),
		Limit:     rate.Inf,
		Burst:     v.Burst,
		Cut:       v.Cut,
		Declared:  v.Declared,
	}
	switch {
	case v.Interval >= neverInterval:
		st.Limit = 0 // a bucket that does not refill (Limit 0)
	case v.Interval > 0:
		st.Limit = rate.Limit(b.pacing.Sec / v.Interval)
	}
	if v.Window {
		st.Window, st.WindowLeft = true, v.WindowLeft
		st.WindowReset = duration(v.WindowReset - now)
	}
	return st
}

// State returns the state of key's quota now, without creating the key:
// a key the Limiter does not remember (never seen, or forgotten) shows
// the state of a new key. The key "" is the Limiter's own quota (WaitN on
// the Limiter).
func (l *Limiter) State(key string) State {
	l.once.Do(l.init)
	if key == "" {
		st, _ := l.def.State(context.Background())
		return st
	}
	if v, ok := l.keys.Load(key); ok {
		st, _ := v.(*bucket).State(context.Background())
		return st
	}
	l.insertMu.Lock()
	b := l.newBucket(key) // not stored
	l.insertMu.Unlock()
	st, _ := b.State(context.Background())
	return st
}
