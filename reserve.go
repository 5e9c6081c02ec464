package throttle

import (
	"context"
	"time"
)

// Reserver is a Waiter that hands out turns without sleeping: ReserveN
// takes a place in the key's queue, as a wait does, and returns it as a
// [Reservation] to keep (wait for it, or act after its Delay) or to
// cancel. The keys of [Limiter] implement it.
type Reserver interface {
	ReserveN(ctx context.Context, n int) (*Reservation, error)
}

// Reservation is a turn in a key's queue for n units, as a wait holds
// while it sleeps: it is x/time/rate's Reservation for a key of a
// [Limiter]. Its turn follows from the key's state, so a pause, a
// server's window or a change of rate moves it, and a reservation
// cancelled ahead of it moves it up: Delay asks the state each time.
// The units are spent at the turn, whether or not anyone waits for it;
// Cancel before the turn gives them back exactly, as a cancelled wait
// does (the turns behind move up, the units go to the next in line,
// never to two).
//
// A Reservation is safe for concurrent use. Its zero value is not
// usable: Reservations come from ReserveN.
type Reservation struct {
	b    *bucket
	qi   int
	e, n int64
	done bool // cancelled or given back; b.mu
}

// ReserveN takes a turn for n units of the key's quota and returns it
// without waiting. As for a wait: a cost the key cannot serve fails
// ([ErrCostExceedsBurst], [ErrInvalidLimit]), and if the turn is past
// ctx's deadline ReserveN returns a [*DeadlineError] and reserves
// nothing. ctx is not kept: it bounds only the taking of the turn.
func (b *bucket) ReserveN(ctx context.Context, n int) (*Reservation, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	if b.dead {
		b.mu.Unlock()
		return b.l.bucket(b.key).ReserveN(ctx, n)
	}
	if err := b.check(n); err != nil {
		b.mu.Unlock()
		return nil, err
	}
	r := &Reservation{b: b, qi: queueFirst, n: int64(n)}
	if n == 0 {
		b.mu.Unlock()
		return r, nil // e = 0: gone
	}
	now := b.l.now()
	s := &b.s
	s.advance(now, b.pacing)
	if s.goNow(now, b.pacing, queueFirst, int64(n)) {
		r.e = s.q[queueFirst].rel
		b.mu.Unlock()
		return r, nil
	}
	e, moved := s.enqueue(now, b.pacing, queueFirst, int64(n))
	if moved {
		b.notifyLocked()
	}
	r.e = e
	turn := s.turn(now, b.pacing, queueFirst, e)
	if turn <= now {
		s.advance(now, b.pacing)
	} else if err := b.overDeadline(ctx, turn-now); err != nil {
		s.cancel(queueFirst, e, int64(n))
		b.mu.Unlock()
		return nil, err
	}
	b.mu.Unlock()
	return r, nil
}

// ReserveN takes a turn for n units of the Limiter's own quota (the key
// ""): see [Reservation].
func (l *Limiter) ReserveN(ctx context.Context, n int) (*Reservation, error) {
	l.once.Do(l.init)
	return l.def.ReserveN(ctx, n)
}

// Delay returns how long from now until the reservation's turn as the
// key's state is now: 0 once it has come, or if it was cancelled.
func (r *Reservation) Delay() time.Duration {
	b := r.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if r.done {
		return 0
	}
	now := b.l.now()
	b.s.advance(now, b.pacing)
	if r.e <= b.s.q[r.qi].rel {
		return 0
	}
	return duration(b.s.turn(now, b.pacing, r.qi, r.e) - now)
}

// Cancel gives the reservation's units back if its turn has not come:
// the turns behind it move up. After the turn, or a second time, it does
// nothing (the units were spent).
func (r *Reservation) Cancel() {
	b := r.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if r.done {
		return
	}
	b.s.advance(b.l.now(), b.pacing)
	r.giveBackLocked()
}

// giveBackLocked cancels the ticket once. It requires b.mu.
func (r *Reservation) giveBackLocked() {
	if r.done {
		return
	}
	r.b.giveBackOnce(r.qi, r.e, r.n, &r.done)
}

// Wait sleeps until the reservation's turn, as a wait does: woken when
// the turn moves. If ctx ends first, or the turn moves past ctx's
// deadline, the reservation is cancelled (its units given back) and
// Wait returns ctx's error or a [*DeadlineError]. After Cancel it returns
// [context.Canceled].
func (r *Reservation) Wait(ctx context.Context) error {
	b := r.b
	b.mu.Lock()
	if r.done {
		b.mu.Unlock()
		return context.Canceled
	}
	now := b.l.now()
	b.s.advance(now, b.pacing)
	if r.e <= b.s.q[r.qi].rel {
		b.mu.Unlock()
		return nil
	}
	if err := ctx.Err(); err != nil {
		r.giveBackLocked()
		b.mu.Unlock()
		return err
	}
	turn := b.s.turn(now, b.pacing, r.qi, r.e)
	if err := b.overDeadline(ctx, turn-now); err != nil {
		r.giveBackLocked()
		b.mu.Unlock()
		return err
	}
	b.sleepers++
	return b.sleep(ctx, r.qi, r.e, r.n, turn, &r.done)
}
