package local

import (
	"context"
	"math"
	"runtime"
	"time"

	"github.com/throttle-go/throttle/internal/schedule"
)

// A key's wait takes a ticket in the key's queue once, sleeps until the
// ticket's turn as the key's state gives it, asks again when the state
// moves queued turns (a pause, a refund ahead, a change of pace), and
// gives the ticket back if its context ends first.

// Wait waits for n units of the first limit and cost in the further ones
// (nil: none) in queue qi (schedule.Retry, ahead of first attempts, or a
// class's: schedule.First, Critical, Background). A turn past ctx's deadline fails at once with a
// *DeadlineError, reserving nothing; a wait whose ctx ends gives its
// units back and returns ctx's error.
func (k *Key) Wait(ctx context.Context, n int, cost []float64, qi int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	k = k.lock()
	// The key's rate may change (SetRate): checked under k.mu.
	if err := k.check(n); err != nil || n == 0 {
		k.mu.Unlock()
		return err
	}
	now := k.ks.Now()
	kc := k.cost(cost)
	if _, moved, ok := k.s.WaitNow(now, k.pacing, qi, int64(n), kc); ok {
		if moved {
			k.notifyLocked()
		}
		k.mu.Unlock()
		return nil
	}
	r := k.s.Apply(now, k.pacing, schedule.Wait{N: int64(n), Queue: qi, MaxWait: maxWait(ctx), MaxQueued: k.maxQueued, Cost: kc})
	if r.Moved {
		k.notifyLocked()
	}
	if !r.OK {
		err := k.refusedLocked(now, n, r)
		k.mu.Unlock()
		return err
	}
	e := r.End
	if k.s.Gone(qi, e) {
		k.mu.Unlock()
		return nil
	}
	// Never returns for units that did not go (the turn and advance
	// agree; this keeps a disagreement from over-sending): sleep.
	turn := max(r.Turn, now)
	k.sleepers++
	// sleep takes k.mu as it is: a change between this turn and the sleep
	// listening for changes would be missed otherwise.
	return k.sleep(ctx, qi, e, int64(n), turn, nil)
}

// refusedLocked returns the error of a wait of n units the state refused
// at now (r): a *QueueFullError, or a *DeadlineError. It requires k.mu.
func (k *Key) refusedLocked(now float64, n int, r schedule.Reply) error {
	if r.Full {
		return &QueueFullError{N: int64(n), Queued: k.s.Queued(), Max: k.maxQueued}
	}
	return &DeadlineError{Delay: Duration(r.Turn - now)}
}

// maxWait returns the most a wait with ctx may wait, in schedule units:
// a turn that far or further is past ctx's deadline (the context would
// end as the wait does); +Inf if ctx has none.
func maxWait(ctx context.Context) float64 {
	if dl, ok := ctx.Deadline(); ok {
		return float64(time.Until(dl))
	}
	return math.Inf(1)
}

// overDeadline returns a *DeadlineError if a wait of d would pass ctx's
// deadline.
func overDeadline(ctx context.Context, d float64) error {
	delay := Duration(d)
	// A turn at the deadline is past it too: the context would end as
	// the wait does.
	if dl, ok := ctx.Deadline(); ok && delay >= time.Until(dl) {
		return &DeadlineError{Delay: delay}
	}
	return nil
}

// sleep sleeps until the ticket (qi, e) of n units goes; it requires k.mu,
// and returns with it released. It wakes at its turn, when a cut's pace
// steps, when the key's state changes (turns may have moved either way),
// and when ctx ends; each time it asks the state again. A wait whose ctx
// ends, or whose moved turn is past ctx's deadline, gives its units back:
// the tickets behind it move up. done, if not nil, is a Reservation's
// flag (k.mu): set when the units are given back, and if set meanwhile by
// Cancel, the sleep ends with context.Canceled.
func (k *Key) sleep(ctx context.Context, qi int, e, n int64, turn float64, done *bool) error {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	defer func() {
		k.sleepers--
		k.mu.Unlock()
	}()
	for {
		now := k.ks.Now()
		changed := k.changedLocked()
		wake := min(turn, k.s.Recheck(now, k.pacing))
		lead := 0.0
		if wake == turn {
			// A wait's own turn, not a cut's step, which wakes every
			// sleeper of the key at once (see strict.Key.SpinLead).
			lead = k.strict.SpinLead(&k.s, now, k.pacing)
		}
		k.mu.Unlock()
		at := wake - lead
		t.Reset(Duration(at - now))
		fired := -1.0 // when the timer fired, if it did
		select {
		case <-t.C:
			fired = k.ks.Now()
		case <-changed:
		case <-ctx.Done():
		}
		// Since Go 1.23 a Reset timer delivers no stale tick.
		if fired >= 0 && lead > 0 {
			k.spinUntil(wake, changed, ctx.Done())
		}
		k.mu.Lock()
		if fired >= 0 {
			k.strict.Fired(fired - at)
		}
		now = k.ks.Now()
		if done != nil && *done {
			return context.Canceled
		}
		k.advanceLocked(now)
		if k.s.Gone(qi, e) {
			iv, _ := k.s.Pace(now, k.pacing)
			k.strict.Woke(now-turn, iv, k.pacing.Sec)
			return nil
		}
		if err := ctx.Err(); err != nil {
			k.giveBack(qi, e, n, done)
			return err
		}
		turn = k.s.Turn(now, k.pacing, qi, e)
		if turn <= now {
			// advance let go every unit whose turn has come; a ticket it
			// kept has its turn later (rounding aside). Never spin: look
			// again a unit's time later.
			iv, _ := k.s.Pace(now, k.pacing)
			turn = now + max(iv, 1e6)
		}
		if err := overDeadline(ctx, turn-now); err != nil {
			k.giveBack(qi, e, n, done)
			return err
		}
	}
}

// giveBack cancels a ticket that has not gone and wakes the waits behind
// it. done, if not nil, is a Reservation's flag, which guards against a
// second cancel: set when the units came back. It requires k.mu.
func (k *Key) giveBack(qi int, e, n int64, done *bool) {
	if done != nil && *done {
		return
	}
	// A ticket that has gone stays gone (rel only grows): only one whose
	// units came back could be cancelled twice, its numbers given out again.
	r := k.s.Apply(k.ks.Now(), k.pacing, schedule.Cancel{Ticket: schedule.Ticket{Queue: qi, End: e}, N: n})
	if r.OK {
		if done != nil {
			*done = true
		}
		k.notifyLocked()
	}
}

// spinUntil yields the processor until the schedules' clock reaches t, or
// changed or done is closed.
func (k *Key) spinUntil(t float64, changed <-chan struct{}, done <-chan struct{}) {
	for k.ks.Now() < t {
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

// Reservation is a ticket of a key's queue, held without sleeping.
type Reservation struct {
	k    *Key
	qi   int
	e, n int64
	done bool // its units came back (Cancel, or a Wait that ended); k.mu
}

// Reserve takes a turn for n units of the first limit and cost in the
// further ones (nil: none) in queue qi, without waiting: as Wait, but it
// returns the ticket instead of sleeping on it.
func (k *Key) Reserve(ctx context.Context, n int, cost []float64, qi int) (*Reservation, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	k = k.lock()
	if err := k.check(n); err != nil {
		k.mu.Unlock()
		return nil, err
	}
	r := &Reservation{k: k, qi: qi, n: int64(n)}
	if n == 0 {
		k.mu.Unlock()
		return r, nil // e = 0: gone
	}
	now := k.ks.Now()
	a := k.s.Apply(now, k.pacing, schedule.Wait{N: int64(n), Queue: qi, MaxWait: maxWait(ctx), MaxQueued: k.maxQueued, Cost: k.cost(cost)})
	if a.Moved {
		k.notifyLocked()
	}
	if !a.OK {
		err := k.refusedLocked(now, n, a)
		k.mu.Unlock()
		return nil, err
	}
	k.mu.Unlock()
	r.e = a.End
	return r, nil
}

// Delay returns how long from now until the turn: 0 once it has come, or
// if the reservation was cancelled.
func (r *Reservation) Delay() time.Duration {
	k := r.k
	k.mu.Lock()
	defer k.mu.Unlock()
	if r.done {
		return 0
	}
	now := k.ks.Now()
	k.advanceLocked(now)
	if k.s.Gone(r.qi, r.e) {
		return 0
	}
	return Duration(k.s.Turn(now, k.pacing, r.qi, r.e) - now)
}

// Cancel gives the units back if the turn has not come: the turns behind
// move up. After the turn, or a second time, it does nothing.
func (r *Reservation) Cancel() {
	k := r.k
	k.mu.Lock()
	defer k.mu.Unlock()
	if r.done {
		return
	}
	k.advanceLocked(k.ks.Now())
	k.giveBack(r.qi, r.e, r.n, &r.done)
}

// Wait sleeps until the turn, as a wait does. If ctx ends first, or the
// turn moves past ctx's deadline, the reservation is cancelled (its units
// given back) and Wait returns ctx's error or a *DeadlineError. After
// Cancel it returns context.Canceled.
func (r *Reservation) Wait(ctx context.Context) error {
	k := r.k
	k.mu.Lock()
	if r.done {
		k.mu.Unlock()
		return context.Canceled
	}
	now := k.ks.Now()
	k.advanceLocked(now)
	if k.s.Gone(r.qi, r.e) {
		k.mu.Unlock()
		return nil
	}
	if err := ctx.Err(); err != nil {
		k.giveBack(r.qi, r.e, r.n, &r.done)
		k.mu.Unlock()
		return err
	}
	turn := k.s.Turn(now, k.pacing, r.qi, r.e)
	if err := overDeadline(ctx, turn-now); err != nil {
		k.giveBack(r.qi, r.e, r.n, &r.done)
		k.mu.Unlock()
		return err
	}
	k.sleepers++
	return k.sleep(ctx, r.qi, r.e, r.n, turn, &r.done)
}

// Try spends n units of the first limit and cost in the further ones
// (nil: none) now, in queue qi (a class's first attempts), if a wait of
// them would go at once; otherwise it changes nothing and returns how
// long from now a wait of them would go.
func (k *Key) Try(ctx context.Context, n int, cost []float64, qi int) (bool, time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return false, 0, err
	}
	k = k.lock()
	if err := k.check(n); err != nil || n == 0 {
		k.mu.Unlock()
		return err == nil, 0, err
	}
	now := k.ks.Now()
	r := k.s.Apply(now, k.pacing, schedule.Try{N: int64(n), Queue: qi, Cost: k.cost(cost)})
	if r.Moved {
		k.notifyLocked()
	}
	k.mu.Unlock()
	if r.OK {
		return true, 0, nil
	}
	return false, Duration(r.Turn - now), nil
}
