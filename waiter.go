package throttle

import (
	"context"
	"time"
)

// Waiter is the seam between "how much may I send" and "where is that state
// kept". WaitN blocks until n units of quota are available, or until ctx ends.
//
// The method matches [golang.org/x/time/rate.Limiter.WaitN], so a plain
// *rate.Limiter is a Waiter where one in-process bucket is all a program
// needs. The per-key [Limiter] and the Redis-backed waiter in the distributed
// package implement it too, and add [KeyedWaiter] and [Pauser].
//
// Implementations in this module keep the contract below; a Waiter written
// by a user should too:
//
//   - Reservation, not polling: a wait asks once when its turn is and sleeps
//     until then. Callers are served in arrival order.
//   - Deadline-aware: if the turn is later than ctx's deadline, WaitN returns
//     at once with an error matching [ErrWouldExceedDeadline] and
//     [context.DeadlineExceeded], and reserves nothing.
//   - Cancellation gives back: if ctx ends while waiting, the reservation is
//     returned, so the quota is not lost, and WaitN returns ctx's error.
//   - n larger than the burst is an error ([ErrCostExceedsBurst]), not an
//     eternal wait.
type Waiter interface {
	WaitN(ctx context.Context, n int) error
}

// KeyedWaiter is a Waiter that keeps a separate quota per key: a host, an
// API key, a tenant, a route. [Transport] uses For(key) for each request
// when its Waiter implements KeyedWaiter, and the Waiter itself otherwise.
//
// Keys may come from user input: implementations keep memory bounded however
// many distinct keys they see.
type KeyedWaiter interface {
	Waiter
	// For returns the waiter of key's quota. It is cheap: callers may call
	// For on every use instead of keeping the result.
	For(key string) Waiter
}

// Pauser is a Waiter that can be told "nothing before d from now": a server
// said its quota is spent. Every caller of the quota holds off until then
// (for a shared waiter, every process that shares it). A pause never
// shortens an earlier, longer one.
//
// Pause takes a duration rather than a time so that no clock other than the
// waiter's own is involved: the server's reset times are converted to
// durations against the server's Date header (see [ratelimit.Parse]).
type Pauser interface {
	Pause(ctx context.Context, d time.Duration) error
}

// RetryWaiter is a Waiter that can queue a wait ahead of first attempts:
// for a request sent again after a server refused it, so that a retry
// keeps its place instead of going behind every request that arrived
// meanwhile. Retries wait among themselves in arrival order; the quota's
// pace, pauses and windows apply to them as to any wait. [Transport] uses
// it for retries when the key's waiter implements it.
type RetryWaiter interface {
	WaitRetryN(ctx context.Context, n int) error
}
