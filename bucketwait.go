package throttle

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"time"

	"github.com/throttle-go/throttle/internal/schedule"
)

// A key's wait (bucket): it takes a ticket in the key's queue once, sleeps
// until the ticket's turn as the key's state gives it, asks again when the
// state moves queued turns (a pause, a refund ahead, a change of pace),
// and gives the ticket back if its context ends first.

// WaitN waits for n units of the bucket's quota.
func (b *bucket) WaitN(ctx context.Context, n int) error {
	return b.wait(ctx, n, schedule.First)
}

// WaitRetryN waits for n units of the bucket's quota ahead of first
// attempts: see [RetryWaiter].
func (b *bucket) WaitRetryN(ctx context.Context, n int) error {
	return b.wait(ctx, n, schedule.Retry)
}

// check validates a cost of n against the key's rate. It requires b.mu.
func (b *bucket) check(n int) error {
	switch {
	case n < 0:
		return fmt.Errorf("throttle: wait for %d units of %q: %w", n, b.key, ErrInvalidLimit)
	case b.limit < 0 || b.burst < 0 || math.IsNaN(float64(b.limit)):
		return fmt.Errorf("throttle: %q has limit %v, burst %d: %w", b.key, b.limit, b.burst, ErrInvalidLimit)
	case b.pacing.Interval > 0 && n > b.burst:
		return fmt.Errorf("throttle: wait for %d units of %q, burst %d: %w", n, b.key, b.burst, ErrCostExceedsBurst)
	case b.xerr != nil:
		return b.xerr
	}
	return nil
}

func (b *bucket) wait(ctx context.Context, n, qi int) error {
	return b.waitUnits(ctx, n, nil, qi)
}

// waitUnits waits for n units of the first limit and units of the
// further ones (limits.go).
func (b *bucket) waitUnits(ctx context.Context, n int, units []UnitCost, qi int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	if b.dead {
		b.mu.Unlock()
		return b.l.bucket(b.key).waitUnits(ctx, n, units, qi)
	}
	// The key's rate may change (SetRate): checked under b.mu.
	if err := b.check(n); err != nil || n == 0 {
		b.mu.Unlock()
		return err
	}
	cost, err := b.costOf(units)
	if err != nil {
		b.mu.Unlock()
		return err
	}
	now := b.l.now()
	s := &b.s
	b.advanceLocked(now)
	if _, ok := s.GoNow(now, b.pacing, qi, int64(n), cost); ok {
		b.mu.Unlock()
		return nil
	}
	e, moved := s.Enqueue(now, b.pacing, qi, int64(n), cost)
	if moved {
		b.notifyLocked()
	}
	turn := s.Turn(now, b.pacing, qi, e)
	if turn <= now {
		b.advanceLocked(now) // lets the ticket go
		if s.Gone(qi, e) {
			b.mu.Unlock()
			return nil
		}
		// Never returns for units that did not go (the turn and advance
		// agree; this keeps a disagreement from over-sending): sleep.
		turn = max(s.Turn(now, b.pacing, qi, e), now)
	}
	if err := b.overDeadline(ctx, turn-now); err != nil {
		s.Cancel(now, qi, e, int64(n))
		b.mu.Unlock()
		return err
	}
	b.sleepers++
	// sleep takes b.mu as it is: a change between this turn and the sleep
	// listening for changes would be missed otherwise.
	return b.sleep(ctx, qi, e, int64(n), turn, nil)
}

// overDeadline returns a *DeadlineError if a wait of d would pass ctx's
// deadline.
func (b *bucket) overDeadline(ctx context.Context, d float64) error {
	delay := duration(d)
	// A turn at the deadline is past it too: the context would end as
	// the wait does.
	if dl, ok := ctx.Deadline(); ok && delay >= time.Until(dl) {
		return &DeadlineError{Key: b.key, Delay: delay}
	}
	return nil
}

// sleep sleeps until the ticket (qi, e) of n units goes; it requires b.mu,
// and returns with it released. It wakes at its
// turn, when a cut's pace steps, when the key's state changes (turns may
// have moved either way), and when ctx ends; each time it asks the state
// again. A wait whose ctx ends, or whose moved turn is past ctx's deadline,
// gives its units back: the tickets behind it move up. done, if not nil,
// is a Reservation's flag (b.mu): set when the units are given back, and
// if set meanwhile by Cancel, the sleep ends with context.Canceled.
func (b *bucket) sleep(ctx context.Context, qi int, e, n int64, turn float64, done *bool) error {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	defer func() {
		b.sleepers--
		b.mu.Unlock()
	}()
	for {
		now := b.l.now()
		changed := b.changedLocked()
		wake := min(turn, b.s.Recheck(now, b.pacing))
		lead := 0.0
		if wake == turn {
			// A wait's own turn, not a cut's step, which wakes every
			// sleeper of the key at once (see spinLead).
			lead = b.strict.SpinLead(&b.s, now, b.pacing)
		}
		b.mu.Unlock()
		at := wake - lead
		t.Reset(duration(at - now))
		fired := -1.0 // when the timer fired, if it did
		select {
		case <-t.C:
			fired = b.l.now()
		case <-changed:
		case <-ctx.Done():
		}
		// Since Go 1.23 a Reset timer delivers no stale tick.
		if fired >= 0 && lead > 0 {
			spinUntil(b.l, wake, changed, ctx.Done()) // see spinLead
		}
		b.mu.Lock()
		if fired >= 0 {
			b.strict.Fired(fired - at)
		}
		now = b.l.now()
		if done != nil && *done {
			return context.Canceled
		}
		b.advanceLocked(now)
		if b.s.Gone(qi, e) {
			iv, _ := b.s.Pace(now, b.pacing)
			b.strict.Woke(now-turn, iv, b.pacing.Sec)
			return nil
		}
		if err := ctx.Err(); err != nil {
			b.giveBack(qi, e, n, done)
			return err
		}
		turn = b.s.Turn(now, b.pacing, qi, e)
		if turn <= now {
			// advance let go every unit whose turn has come; a ticket it
			// kept has its turn later (rounding aside). Never spin: look
			// again a unit's time later.
			iv, _ := b.s.Pace(now, b.pacing)
			turn = now + max(iv, 1e6)
		}
		if err := b.overDeadline(ctx, turn-now); err != nil {
			b.giveBack(qi, e, n, done)
			return err
		}
	}
}

// advanceLocked advances the key's state at now and wakes its sleepers
// if that moved their turns earlier (the trim gave a step back: see
// schedule.sped). It requires b.mu.
func (b *bucket) advanceLocked(now float64) {
	b.s.Advance(now, b.pacing)
	b.wakeIfSped()
}

// wakeIfSped wakes the key's sleepers if the schedule moved turns earlier
// since it was last asked. It requires b.mu.
func (b *bucket) wakeIfSped() {
	if b.s.Sped() {
		b.notifyLocked()
	}
}

// giveBack cancels a ticket that has not gone and wakes the waits behind
// it. done, if not nil, is a Reservation's flag, which guards against a
// second cancel: set when the units came back. It requires b.mu.
func (b *bucket) giveBack(qi int, e, n int64, done *bool) {
	if done != nil && *done {
		return
	}
	// A ticket that has gone stays gone (rel only grows): only one whose
	// units came back could be cancelled twice, its numbers given out again.
	if b.s.Cancel(b.l.now(), qi, e, n) {
		if done != nil {
			*done = true
		}
		b.notifyLocked()
	}
}

// changedLocked returns a channel closed at the next change of the key's
// state. It requires b.mu.
func (b *bucket) changedLocked() <-chan struct{} {
	if b.changed == nil {
		b.changed = make(chan struct{})
	}
	return b.changed
}

// notifyLocked wakes every sleeping wait to ask for its turn again. It
// requires b.mu.
func (b *bucket) notifyLocked() {
	if b.changed != nil {
		close(b.changed)
		b.changed = nil
	}
}

// spinUntil yields the processor until l's clock reaches t, or changed
// or done is closed.
func spinUntil(l *Limiter, t float64, changed <-chan struct{}, done <-chan struct{}) {
	for l.now() < t {
		select {
		case <-changed:
			return
		case <-done:
			return
		default:
			runtime.Gosched()
		}
	}
}
