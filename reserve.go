package throttle

import (
	"context"
	"time"

	"github.com/throttle-go/throttle/internal/schedule"
)

// Reserver is a Waiter that hands out turns without sleeping: ReserveN
// takes a place in the key's queue, as a wait does, and returns it as a
// [Reservation] to keep (wait for it, or act after its Delay) or to
// cancel. As for a wait: a cost the key cannot serve fails
// ([ErrCostExceedsBurst], [ErrInvalidLimit]), and a turn past ctx's
// deadline returns a [*DeadlineError] and reserves nothing; ctx bounds
// only the taking of the turn. The keys of [Limiter] and of
// distributed.Quota implement it.
type Reserver interface {
	ReserveN(ctx context.Context, n int) (Reservation, error)
}

// Reservation is a turn in a key's queue for n units, as a wait holds
// while it sleeps: x/time/rate's Reservation for a key. Its turn follows
// from the key's state, so a pause, a server's window or a change of rate
// moves it, and a reservation cancelled ahead of it moves it up. The units
// are spent at the turn, whether or not anyone waits for it; Cancel
// before the turn gives them back exactly, as a cancelled wait does (the
// turns behind move up, the units go to the next in line, never to two).
// Implementations are safe for concurrent use.
type Reservation interface {
	// Delay returns how long from now until the turn: 0 once it has come,
	// or if the reservation was cancelled. A [Limiter]'s asks the key's
	// state each time; a shared quota's returns the turn as learned when
	// it was reserved (its Wait asks the store).
	Delay() time.Duration
	// Cancel gives the units back if the turn has not come: the turns
	// behind move up. After the turn, or a second time, it does nothing.
	Cancel()
	// Wait sleeps until the turn, as a wait does: woken when the turn
	// moves. If ctx ends first, or the turn moves past ctx's deadline,
	// the reservation is cancelled (its units given back) and Wait
	// returns ctx's error or a [*DeadlineError]. After Cancel it returns
	// [context.Canceled].
	Wait(ctx context.Context) error
}

// reservation is a Limiter key's Reservation: a ticket of its schedule.
type reservation struct {
	b    *bucket
	qi   int
	e, n int64
	done bool // its units came back (Cancel, or a Wait that ended); b.mu
}

// ReserveN takes a turn for n units of the key's quota and returns it
// without waiting: see [Reserver].
func (b *bucket) ReserveN(ctx context.Context, n int) (Reservation, error) {
	return b.reserveUnits(ctx, n, nil, schedule.First)
}

// reserveUnits takes a turn in queue qi for n units of the first limit
// and units of the further ones (limits.go).
func (b *bucket) reserveUnits(ctx context.Context, n int, units []UnitCost, qi int) (Reservation, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	if b.dead {
		b.mu.Unlock()
		return b.l.bucket(b.key).reserveUnits(ctx, n, units, qi)
	}
	if err := b.check(n); err != nil {
		b.mu.Unlock()
		return nil, err
	}
	r := &reservation{b: b, qi: qi, n: int64(n)}
	if n == 0 {
		b.mu.Unlock()
		return r, nil // e = 0: gone
	}
	cost, err := b.costOf(units)
	if err != nil {
		b.mu.Unlock()
		return nil, err
	}
	now := b.l.now()
	s := &b.s
	b.advanceLocked(now)
	if e, ok := s.GoNow(now, b.pacing, qi, int64(n), cost); ok {
		r.e = e
		b.mu.Unlock()
		return r, nil
	}
	e, moved := s.Enqueue(now, b.pacing, qi, int64(n), cost)
	if moved {
		b.notifyLocked()
	}
	r.e = e
	turn := s.Turn(now, b.pacing, qi, e)
	if turn <= now {
		b.advanceLocked(now)
	} else if err := b.overDeadline(ctx, turn-now); err != nil {
		s.Cancel(now, qi, e, int64(n))
		b.mu.Unlock()
		return nil, err
	}
	b.mu.Unlock()
	return r, nil
}

// ReserveN takes a turn for n units of the Limiter's own quota (the key
// ""): see [Reservation].
func (l *Limiter) ReserveN(ctx context.Context, n int) (Reservation, error) {
	l.once.Do(l.init)
	return l.def.ReserveN(ctx, n)
}

// Delay implements [Reservation]: the turn as the key's state is now.
func (r *reservation) Delay() time.Duration {
	b := r.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if r.done {
		return 0
	}
	now := b.l.now()
	b.advanceLocked(now)
	if b.s.Gone(r.qi, r.e) {
		return 0
	}
	return duration(b.s.Turn(now, b.pacing, r.qi, r.e) - now)
}

// Cancel implements [Reservation].
func (r *reservation) Cancel() {
	b := r.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if r.done {
		return
	}
	b.advanceLocked(b.l.now())
	r.giveBackLocked()
}

// giveBackLocked cancels the ticket once. It requires b.mu.
func (r *reservation) giveBackLocked() {
	if r.done {
		return
	}
	r.b.giveBack(r.qi, r.e, r.n, &r.done)
}

// Wait implements [Reservation].
func (r *reservation) Wait(ctx context.Context) error {
	b := r.b
	b.mu.Lock()
	if r.done {
		b.mu.Unlock()
		return context.Canceled
	}
	now := b.l.now()
	b.advanceLocked(now)
	if b.s.Gone(r.qi, r.e) {
		b.mu.Unlock()
		return nil
	}
	if err := ctx.Err(); err != nil {
		r.giveBackLocked()
		b.mu.Unlock()
		return err
	}
	turn := b.s.Turn(now, b.pacing, r.qi, r.e)
	if err := b.overDeadline(ctx, turn-now); err != nil {
		r.giveBackLocked()
		b.mu.Unlock()
		return err
	}
	b.sleepers++
	return b.sleep(ctx, r.qi, r.e, r.n, turn, &r.done)
}
