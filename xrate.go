package throttle

import (
	"context"
	"time"

	"golang.org/x/time/rate"
)

// Key is one key of a [Limiter] under x/time/rate's names, for code that
// used a *rate.Limiter per key: Allow, AllowN, Reserve, ReserveN, Wait,
// WaitN, SetLimit, SetBurst, Limit, Burst and Tokens mean what they mean
// there, on the key's schedule (so pauses, a server's window and what
// servers say apply to them too). Where x/time/rate takes a time.Time, a
// Key uses the Limiter's clock: now. Where they differ:
//
//   - Cancel gives back exactly the units of the reservation cancelled
//     (the turns behind it move up), where x/time/rate restores a count
//     that may over- or under-send when other reservations follow
//     (golang/go#56924): see [Reservation].
//   - ReserveN takes a context: its deadline is x/time/rate's maxFutureReserve
//     (a turn past it reserves nothing), and it returns an error where
//     x/time/rate returns a Reservation whose OK is false.
//
// A Key is a handle: cheap to make, safe for concurrent use, and valid
// however long it is kept (a key the Limiter forgot is found again).
type Key struct {
	l   *Limiter
	key string
}

// Key returns the handle of key's quota: see [Key]. The key "" is the
// Limiter's own quota (WaitN on the Limiter).
func (l *Limiter) Key(key string) *Key {
	return &Key{l: l, key: key}
}

func (k *Key) bucket() *bucket { return k.l.bucket(k.key) }

// Allow reports whether one unit may be spent now, and spends it if so.
func (k *Key) Allow() bool { return k.AllowN(1) }

// AllowN reports whether n units may be spent now, and spends them if so:
// exactly when a wait of n would go at once (see [Trier]). A cost the key
// can never serve is not allowed.
func (k *Key) AllowN(n int) bool {
	ok, _, _ := k.bucket().TryN(context.Background(), n)
	return ok
}

// TryN spends n units now or nothing, and says when a wait of n would go
// otherwise: see [Trier].
func (k *Key) TryN(ctx context.Context, n int) (bool, time.Duration, error) {
	return k.bucket().TryN(ctx, n)
}

// Reserve is ReserveN(ctx, 1).
func (k *Key) Reserve(ctx context.Context) (Reservation, error) { return k.ReserveN(ctx, 1) }

// ReserveN takes a turn for n units without waiting: see [Reserver].
func (k *Key) ReserveN(ctx context.Context, n int) (Reservation, error) {
	return k.bucket().ReserveN(ctx, n)
}

// ReserveCost takes a turn for c on every limit: see [CostReserver].
func (k *Key) ReserveCost(ctx context.Context, c Cost) (Reservation, error) {
	return k.bucket().ReserveCost(ctx, c)
}

// Wait is WaitN(ctx, 1).
func (k *Key) Wait(ctx context.Context) error { return k.WaitN(ctx, 1) }

// WaitN waits for n units: see [Waiter] and [Limiter].
func (k *Key) WaitN(ctx context.Context, n int) error { return k.bucket().WaitN(ctx, n) }

// WaitRetryN waits for n units ahead of first attempts: see [RetryWaiter].
func (k *Key) WaitRetryN(ctx context.Context, n int) error {
	return k.bucket().WaitRetryN(ctx, n)
}

// Pause holds the key's waits for d: see [Pauser].
func (k *Key) Pause(ctx context.Context, d time.Duration) error { return k.bucket().Pause(ctx, d) }

// Adapt paces the key by what a server said: see [Adapter].
func (k *Key) Adapt(ctx context.Context, f Feedback) error { return k.bucket().Adapt(ctx, f) }

// AdaptReport implements [AdaptReporter].
func (k *Key) AdaptReport(ctx context.Context, f Feedback) (Adapted, error) {
	return k.bucket().AdaptReport(ctx, f)
}

// State returns the key's state now: see [Inspector]. It never fails.
func (k *Key) State(ctx context.Context) (State, error) { return k.l.State(k.key), nil }

// Tokens is the number of units the key's bucket holds now, less the
// units queued (negative while waits are queued beyond it), as
// x/time/rate's Tokens; +Inf with no limit.
func (k *Key) Tokens() float64 { return k.l.State(k.key).Tokens }

// Limit returns the key's configured rate (not a pace a server declared
// or a slow-down: see [State] for the pace in force). rate.Inf is no limit.
func (k *Key) Limit() rate.Limit {
	return k.rate().Limit
}

// Burst returns the key's configured burst.
func (k *Key) Burst() int {
	return k.rate().Burst
}

func (k *Key) rate() Rate {
	limit, burst := k.bucket().k().Rate()
	return Rate{Limit: limit, Burst: burst}
}

// SetLimit changes the key's rate, keeping its burst: see
// [Limiter.SetRate] (the units the bucket holds are kept, queued waits
// take the new pace). As in x/time/rate, 0 lets nothing more through
// beyond what the bucket holds; rate.Inf is no limit. An invalid limit
// (negative, NaN) is refused and changes nothing.
func (k *Key) SetLimit(l rate.Limit) error {
	return k.l.SetRate(k.key, Rate{Limit: l, Burst: k.Burst()})
}

// SetBurst changes the key's burst, keeping its rate: see
// [Limiter.SetRate].
func (k *Key) SetBurst(b int) error {
	return k.l.SetRate(k.key, Rate{Limit: k.Limit(), Burst: b})
}
