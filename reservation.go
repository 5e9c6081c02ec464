package throttle

import (
	"context"
	"time"

	"github.com/throttle-go/throttle/internal/local"
)

// reservation is a Limiter key's Reservation.
type reservation struct {
	r   *local.Reservation
	key string
}

// Delay implements [Reservation]: the turn as the key's state is now.
func (r *reservation) Delay() time.Duration { return r.r.Delay() }

// Cancel implements [Reservation].
func (r *reservation) Cancel() { r.r.Cancel() }

// Wait implements [Reservation].
func (r *reservation) Wait(ctx context.Context) error {
	return keyErr(r.key, r.r.Wait(ctx))
}
