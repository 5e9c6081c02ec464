package throttle

import (
	"context"
	"time"

	"github.com/throttle-go/throttle/internal/schedule"
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
func (b *bucket) TryN(ctx context.Context, n int) (bool, time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return false, 0, err
	}
	b.mu.Lock()
	if b.dead {
		b.mu.Unlock()
		return b.l.bucket(b.key).TryN(ctx, n)
	}
	if err := b.check(n); err != nil || n == 0 {
		b.mu.Unlock()
		return err == nil, 0, err
	}
	now := b.l.now()
	b.advanceLocked(now)
	ok, turn := b.s.Try(now, b.pacing, schedule.First, int64(n), b.xcost0())
	b.wakeIfSped()
	b.mu.Unlock()
	if ok {
		return true, 0, nil
	}
	return false, duration(turn - now), nil
}

// Allow reports whether one unit of the key's quota could be spent now,
// and spends it if so: TryN(ctx, 1) without a context (it never blocks).
// It is x/time/rate's Allow for a key.
func (b *bucket) Allow() bool {
	ok, _, _ := b.TryN(context.Background(), 1)
	return ok
}

// TryN spends n units of the Limiter's own quota (the key "") now, or
// nothing: see [Trier].
func (l *Limiter) TryN(ctx context.Context, n int) (bool, time.Duration, error) {
	l.once.Do(l.init)
	return l.def.TryN(ctx, n)
}

// Allow reports whether one unit of the Limiter's own quota (the key "")
// could be spent now, and spends it if so, as x/time/rate's Allow. For a
// key: l.For(key).(throttle.Trier).TryN(ctx, 1).
func (l *Limiter) Allow() bool {
	l.once.Do(l.init)
	return l.def.Allow()
}
