package throttle

import (
	"context"
	"time"
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
