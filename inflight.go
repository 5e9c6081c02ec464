package throttle

import (
	"context"
	"fmt"
	"sync"
	"time"
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

// noRelease is the release of an acquisition that holds nothing.
func noRelease() {}

// slots is one key's in-flight cap: the units held and the acquisitions
// waiting, first come first served (x/sync/semaphore's rule: a waiter
// that does not fit blocks those behind it). Its fields are guarded by
// the bucket's mu, except limit.
type slots struct {
	limit int64 // the cap; 0: none; set by newBucket, read-only after

	held       int64       // units held now
	head, tail *slotWaiter // the acquisitions waiting, in arrival order
}

// slotWaiter is one acquisition waiting for its units, in a list in
// arrival order.
type slotWaiter struct {
	n          int64
	ready      chan struct{} // closed when the units are granted
	prev, next *slotWaiter
}

// busy reports whether units are held or waited for: such a key is not
// idle (see evict.go).
func (s *slots) busy() bool {
	return s.held > 0 || s.head != nil
}

func (s *slots) push(w *slotWaiter) {
	w.prev = s.tail
	if s.tail != nil {
		s.tail.next = w
	} else {
		s.head = w
	}
	s.tail = w
}

func (s *slots) unlink(w *slotWaiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		s.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		s.tail = w.prev
	}
	w.prev, w.next = nil, nil
}

// grant hands units to the waiters at the head of the queue while they
// fit.
func (s *slots) grant() {
	for w := s.head; w != nil && s.held+w.n <= s.limit; w = s.head {
		s.held += w.n
		s.unlink(w)
		close(w.ready)
	}
}

// release gives n units back and grants them to the next in line.
func (s *slots) release(n int64) {
	s.held -= n
	s.grant()
}

// AcquireN waits until n units fit under the key's in-flight cap and
// takes them: see [Acquirer]. A wait that blocked 1ms or more is reported
// as an [EventInFlight] to the Limiter's OnEvent and the call's context
// ([WithEvents]).
func (b *bucket) AcquireN(ctx context.Context, n int) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := &b.inflight
	// The cap is set when the bucket is made and never changes: a key
	// without one costs no lock.
	switch {
	case n < 0:
		return nil, fmt.Errorf("throttle: acquire %d units of %q: %w", n, b.key, ErrInvalidLimit)
	case s.limit == 0 || n == 0:
		return noRelease, nil
	case int64(n) > s.limit:
		return nil, fmt.Errorf("throttle: acquire %d units of %q, in-flight cap %d: %w", n, b.key, s.limit, ErrCostExceedsBurst)
	}
	b.mu.Lock()
	if b.dead {
		b.mu.Unlock()
		return b.l.bucket(b.key).AcquireN(ctx, n)
	}
	if s.head == nil && s.held+int64(n) <= s.limit {
		s.held += int64(n)
		b.mu.Unlock()
		return b.releaser(int64(n)), nil
	}
	w := &slotWaiter{n: int64(n), ready: make(chan struct{})}
	s.push(w)
	b.sleepers++ // a key with waits sleeping is forgotten last (evict.go)
	b.mu.Unlock()
	start := time.Now()
	var err error
	select {
	case <-w.ready:
	case <-ctx.Done():
		b.mu.Lock()
		select {
		case <-w.ready:
			// Granted as ctx ended: give the units back, to the next in
			// line.
			s.release(w.n)
		default:
			head := s.head == w
			s.unlink(w)
			if head {
				// The waiters behind the head may fit now.
				s.grant()
			}
		}
		b.mu.Unlock()
		err = ctx.Err()
	}
	b.mu.Lock()
	b.sleepers--
	b.mu.Unlock()
	if d := time.Since(start); d >= minReportedWait {
		b.reportInFlight(ctx, d, err)
	}
	if err != nil {
		return nil, err
	}
	return b.releaser(w.n), nil
}

// releaser returns the release of n units held on b: the first call
// gives them back, later ones do nothing.
func (b *bucket) releaser(n int64) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			b.inflight.release(n)
			b.mu.Unlock()
		})
	}
}

// reportInFlight reports an acquisition that blocked for d on the key's
// cap (err: it ended without the units).
func (b *bucket) reportInFlight(ctx context.Context, d time.Duration, err error) {
	sink := sinkFrom(ctx)
	if sink == nil && b.l.OnEvent == nil {
		return
	}
	decided{{Kind: EventInFlight, Key: b.key, Delay: d, Err: err}}.emit(b.l.OnEvent, sink)
}

// AcquireN waits until n units fit under the in-flight cap of the
// Limiter's own quota (the key "") and takes them: see [Acquirer].
func (l *Limiter) AcquireN(ctx context.Context, n int) (func(), error) {
	l.once.Do(l.init)
	return l.def.AcquireN(ctx, n)
}

// inFlight returns key's in-flight cap: its override, or the Limiter's.
func (l *Limiter) inFlight(key string) int {
	if c, ok := l.caps[key]; ok {
		return max(c, 0)
	}
	return max(l.InFlight, 0)
}
