package local

import (
	"context"
	"sync"
	"time"
)

// The in-flight cap: at most limit units held at any instant, granted
// first come first served. It is the key's own state, beside the
// schedule: a wait takes its slot, then its turn, or nothing.

// slots is a key's in-flight state. Its fields are protected by the
// key's mu.
type slots struct {
	limit int64 // the cap; 0: none; set when the key is made, read-only after

	held       int64       // units held now
	head, tail *slotWaiter // the acquisitions waiting, in arrival order
}

// slotWaiter is an acquisition waiting for its units.
type slotWaiter struct {
	n          int64
	ready      chan struct{} // closed when the units are granted
	prev, next *slotWaiter
}

// busy reports whether units are held or waited for.
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

// grant gives units to the waiters at the head while they fit: first come
// first served, so a large acquisition is not passed by smaller ones.
func (s *slots) grant() {
	for w := s.head; w != nil && s.held+w.n <= s.limit; w = s.head {
		s.held += w.n
		s.unlink(w)
		close(w.ready)
	}
}

func (s *slots) release(n int64) {
	s.held -= n
	s.grant()
}

// Capped reports whether the key caps its units in flight.
func (k *Key) Capped() bool { return k.slots.limit > 0 }

func noRelease() {}

// Acquire waits until n units fit under the key's in-flight cap and takes
// them; release gives them back (the first call; later ones do nothing).
// If ctx ends first, it takes nothing and returns ctx's error. An
// acquisition that blocked a millisecond or more is told to to.
func (k *Key) Acquire(ctx context.Context, n int, to Listener) (release func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := &k.slots
	// The cap is set when the key is made and never changes: a key
	// without one costs no lock.
	switch {
	case n < 0:
		return nil, errorf(ErrInvalid, "acquire %d units of %q", n, k.key)
	case s.limit == 0 || n == 0:
		return noRelease, nil
	case int64(n) > s.limit:
		return nil, errorf(ErrCost, "acquire %d units of %q, in-flight cap %d", n, k.key, s.limit)
	}
	k = k.lock()
	s = &k.slots
	if s.head == nil && s.held+int64(n) <= s.limit {
		s.held += int64(n)
		k.mu.Unlock()
		return k.releaser(int64(n)), nil
	}
	w := &slotWaiter{n: int64(n), ready: make(chan struct{})}
	s.push(w)
	k.sleepers++ // a key with waits sleeping is forgotten last
	k.mu.Unlock()
	start := time.Now()
	select {
	case <-w.ready:
	case <-ctx.Done():
		k.mu.Lock()
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
		k.mu.Unlock()
		err = ctx.Err()
	}
	k.mu.Lock()
	k.sleepers--
	k.mu.Unlock()
	if err == nil {
		release = k.releaser(w.n)
	}
	if d := time.Since(start); d >= minShift && to.Emit != nil {
		defer func() {
			if p := recover(); p != nil && release != nil {
				release() // a listener panicked: the caller never gets it
				panic(p)
			} else if p != nil {
				panic(p)
			}
		}()
		to.Emit(Decided{Kind: InFlight, Delay: d, Err: err})
	}
	if err != nil {
		return nil, err
	}
	return release, nil
}

// releaser returns the release of n units held on k: the first call gives
// them back, later ones do nothing.
func (k *Key) releaser(n int64) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			k.mu.Lock()
			k.slots.release(n)
			k.mu.Unlock()
		})
	}
}
