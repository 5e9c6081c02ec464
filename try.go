package throttle

import (
	"context"
	"time"
)

// Trier is a Waiter that can spend now or not at all, never blocking: for
// a queue worker that would rather requeue a job than wait, or a caller
// that sheds load. TryN spends n units if a wait of n would go at once
// (nothing queued ahead of it, no pause, and every limit of the key
// allows it) and reports ok; otherwise it changes nothing and reports
// retryIn, how long from now a wait of n would go if the key's state did
// not change meanwhile (other callers, a pause, a server's window may
// change it either way).
//
// err is not nil only when TryN cannot decide: a cost the key can never
// serve ([ErrCostExceedsBurst], [ErrInvalidLimit]), ctx already ended, or
// a shared store that cannot answer (see the distributed package's
// FailMode). The keys of [Limiter] and of distributed.Quota implement it.
type Trier interface {
	TryN(ctx context.Context, n int) (ok bool, retryIn time.Duration, err error)
}

// TryN spends n units of the key's quota now, or nothing: see [Trier].
// It never blocks, and fails only for a cost the key cannot serve or a
// ctx that has ended.
// Allow reports whether one unit of the key's quota could be spent now,
// and spends it if so: TryN(ctx, 1) without a context (it never blocks).
// It is x/time/rate's Allow for a key.
// TryN spends n units of the Limiter's own quota (the key "") now, or
// nothing: see [Trier].
// Allow reports whether one unit of the Limiter's own quota (the key "")
// could be spent now, and spends it if so, as x/time/rate's Allow. For a
// key: l.For(key).(throttle.Trier).TryN(ctx, 1).
