package throttle

import (
	"context"
	"time"
)

// Waiter waits for n units of a quota: x/time/rate's WaitN, so a
// *rate.Limiter is one, and so is every [Quota]. [Transport] paces with a
// Waiter; one that is also [Quotas] keeps a quota per key.
type Waiter interface {
	WaitN(ctx context.Context, n int) error
}

// Quotas keeps a quota per key (a host, an API key, a tenant): [Limiter]
// in one process, and the distributed package's Limiter across a fleet.
type Quotas interface {
	Waiter
	// For returns key's quota. It never fails; a key not seen before
	// starts with a full quota.
	For(key string) Quota
}

// Quota is one key's quota: its limits and what servers said of them,
// with every operation a program does on it. [Limiter.For] and the
// distributed package's Limiter.For return one, with the same behaviour:
// a program moves from one process to a fleet by changing its
// constructor.
//
// Costs: an operation takes [Cost] values (several add up; none is one
// unit of the first limit), and x/time/rate's short forms take a count of
// units of the first limit (WaitN, AllowN, ReserveN).
//
// The guarantees every operation keeps:
//   - waits are turns in a queue: a wait takes its place once and sleeps
//     until its turn, callers are served in arrival order (a retry's cost,
//     [Cost].Retry, ahead of first attempts), also while the key is
//     paused or a server's window is spent;
//   - a turn past ctx's deadline fails at once with an error matching
//     [ErrWouldExceedDeadline] and [context.DeadlineExceeded], and
//     reserves nothing;
//   - a wait whose ctx ends gives its units back exactly: the waits
//     behind it move up, and the units go to the next in line, never to
//     two;
//   - a cost larger than a limit holds at once fails with
//     [ErrCostExceedsBurst]; a negative one, or a unit the key has no
//     limit in, with [ErrInvalidLimit].
//
// Implementations are safe for concurrent use.
type Quota interface {
	Waiter

	// Wait blocks until cost can be spent, and spends it; nothing given,
	// one unit.
	Wait(ctx context.Context, cost ...Cost) error

	// Try spends cost now if a wait for it would go at once (nothing
	// queued ahead, no pause, every limit holds it) and reports ok;
	// otherwise it changes nothing and reports retryIn, how long from
	// now a wait for it would go if nothing changed meanwhile. err is
	// not nil only when it cannot tell: a cost the key can never serve,
	// ctx ended, a shared store that cannot answer.
	Try(ctx context.Context, cost ...Cost) (ok bool, retryIn time.Duration, err error)
	// Allow is Try without a context or its delay: x/time/rate's Allow.
	Allow(cost ...Cost) bool
	// AllowN is Allow of n units of the first limit.
	AllowN(n int) bool

	// Reserve takes a turn for cost as a wait does, and returns it
	// without sleeping: a [Reservation] to wait for, act on after its
	// Delay, or cancel. ctx bounds only the taking of the turn.
	Reserve(ctx context.Context, cost ...Cost) (Reservation, error)
	// ReserveN is Reserve of n units of the first limit.
	ReserveN(ctx context.Context, n int) (Reservation, error)

	// Settle amends a wait that spent spent to what it really cost,
	// actual (an LLM call's tokens, known from its usage): less gives
	// units back, so the waits queued behind go earlier; more charges a
	// debt the next waits pay. Units given back never make a limit hold
	// more than it holds at once, and a charge is at most what a limit
	// holds at once beyond spent (more is dropped, and reported as an
	// [EventClamp]). actual is the whole cost: its N (where the first
	// limit counts requests, 1: an N left 0 gives the request back), and
	// each unit it names (a unit it does not name stays as spent). Settle each wait at
	// most once, with what it spent: the quota keeps no receipt.
	Settle(ctx context.Context, spent, actual Cost) error

	// Acquire waits until n units fit under the key's in-flight cap and
	// takes them, first come first served; release gives them back (the
	// first call; later ones do nothing). A key without a cap takes
	// nothing and never blocks. If ctx ends first, it takes nothing.
	Acquire(ctx context.Context, n int) (release func(), err error)

	// Pause holds every caller of the key until d from now, the waits
	// queued included: for a fleet, every process. A pause never shortens
	// a longer one.
	Pause(ctx context.Context, d time.Duration) error

	// Observe applies what a response said of the key's quota: pauses,
	// windows, declared limits, refusals. [Transport] calls it for every
	// response; a queue worker that reads its own responses may too.
	Observe(ctx context.Context, f Feedback) (Observed, error)

	// State returns the key's state now, read only.
	State(ctx context.Context) (State, error)
}

// Cost is what a wait spends: N units of the key's first limit (the unit
// WaitN counts: a request, for a Transport), and Units of its further
// limits by unit, e.g.
//
//	throttle.Cost{N: 1, Units: map[string]int{"tokens": 500}}
//
// A unit named must be one of the key's limits'. The zero Cost spends
// nothing; an operation given no Cost spends one unit of the first limit.
type Cost struct {
	N     int
	Units map[string]int
	// Retry: the cost of a retry, which goes ahead of first attempts (a
	// [Transport]'s retries).
	Retry bool
}

// sum adds costs up: none is one unit of the first limit.
func sum(cs []Cost) Cost {
	switch len(cs) {
	case 0:
		return Cost{N: 1}
	case 1:
		return cs[0]
	}
	var t Cost
	for _, c := range cs {
		t.N += c.N
		t.Retry = t.Retry || c.Retry
		for u, v := range c.Units {
			if t.Units == nil {
				t.Units = make(map[string]int)
			}
			t.Units[u] += v
		}
	}
	return t
}

// Reservation is a turn in a key's queue, held without sleeping:
// x/time/rate's Reservation for a key. Its turn follows from the key's
// state, so a pause, a server's window or a change of rate moves it, and a
// reservation cancelled ahead of it moves it up. The units are spent at
// the turn, whether or not anyone waits for it. Implementations are safe
// for concurrent use.
type Reservation interface {
	// Delay returns how long from now until the turn: 0 once it has come,
	// or if the reservation was cancelled.
	Delay() time.Duration
	// Cancel gives the units back if the turn has not come: the turns
	// behind move up. After the turn, or a second time, it does nothing.
	Cancel()
	// Wait sleeps until the turn. If ctx ends first, or the turn moves
	// past ctx's deadline, the reservation is cancelled and Wait returns
	// ctx's error or a [*DeadlineError]; after Cancel, context.Canceled.
	Wait(ctx context.Context) error
}

// Observed is what a [Quota] did with a [Feedback].
type Observed struct {
	// Pause is the pause it set for the Feedback's Pause: that, or less
	// where it knows the quota frees sooner (a budget it learned from
	// refusals ends a refused probe's pause at its window's end, not at
	// the whole-second Retry-After); 0 when the Feedback had none.
	Pause time.Duration
	// Timing: it took a bare refusal for a strict server's timing, not
	// its budget, and left its pace as it was: the request may go again
	// at its next turn, without a backoff.
	Timing bool
}
