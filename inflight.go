package throttle

import (
	"context"
)

// Acquirer is a Waiter whose keys cap the units in flight: at most a cap
// of units held at any instant, as an API that allows 100 concurrent
// requests (GitHub) or a tier's concurrency limit (OpenAI) states it.
// AcquireN waits until n more units fit under the key's cap, takes them,
// and returns the function that gives them back. The cap is a limit of
// its own, beside the key's rate: a caller acquires, then waits for its
// turn ([Waiter.WaitN]), sends, and releases when the work is over; if
// the wait fails it releases at once, so that nothing is held.
// [Transport] does this for every attempt.
//
// The contract, as for a wait:
//
//   - Arrival order: acquisitions are served first come, first served; a
//     large one at the head of the queue is not overtaken by small ones
//     behind it. Waiting is not polling: a release wakes the next in line.
//   - If ctx ends (its deadline passes, or it is cancelled) before the
//     units fit, AcquireN returns ctx's error and holds nothing; the
//     acquisitions behind it move up. No turn is known in advance (a slot
//     frees when a holder releases it), so the deadline is not refused
//     early as a wait's turn is.
//   - n larger than the cap fails at once with [ErrCostExceedsBurst]; a
//     key without a cap returns at once, with a release that does nothing.
//   - release gives the units back exactly once: calling it again does
//     nothing, and never frees units another acquisition holds. It is
//     safe to call from any goroutine, and does not block.
//
// The keys of [Limiter] (see [Limiter.InFlight]) and of distributed.Quota
// implement it.
type Acquirer interface {
	AcquireN(ctx context.Context, n int) (release func(), err error)
}

// uncapped is an [Acquirer] that can tell that its key has no in-flight
// cap, now or later: its AcquireN holds nothing, so [Transport] neither
// calls it nor wraps a response's body to release it. The distributed
// Quota's keys implement it (the method is exported for that package
// alone: the keys' type is not).
type uncapped interface {
	NoInFlightCap() bool
}

// AcquireN waits until n units fit under the key's in-flight cap and
// takes them: see [Acquirer]. A wait that blocked 1ms or more is reported
// as an [EventInFlight] to the Limiter's OnEvent and the call's context
// ([WithEvents]).
// releaser returns the release of n units held on b: the first call
// gives them back, later ones do nothing.
// reportInFlight reports an acquisition that blocked for d on the key's
// cap (err: it ended without the units).
// AcquireN waits until n units fit under the in-flight cap of the
// Limiter's own quota (the key "") and takes them: see [Acquirer].
// inFlight returns key's in-flight cap: its override, or the Limiter's.
