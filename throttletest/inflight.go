package throttletest

import (
	"net/http"
	"sync"
	"time"
)

// InFlight caps concurrent requests, as a backend's worker pool or a
// gateway's concurrency limit does: a request arriving while Limit are
// being served is refused at once with a 429 (with Retry-After: 1 when
// RetryAfter is set); an admitted one is served for Hold, then answered.
//
// The zero value is not usable: every request is answered 500 with a
// message saying so. Create one with [NewInFlight]; set the fields before the first request.
// It is an [http.Handler], safe for concurrent use; it records what it saw
// in its [Counter], and [InFlight.Peak] is the most it served at once.
type InFlight struct {
	Counter

	Limit int           // requests served at once; set by NewInFlight
	Hold  time.Duration // how long each is served; set by NewInFlight
	// RetryAfter adds Retry-After: 1 to a refusal. False means a bare 429.
	RetryAfter bool
	// Now is the server's clock. Nil means time.Now (the fake clock
	// inside a testing/synctest bubble). The Hold is slept with a timer:
	// on the fake clock inside a bubble.
	Now func() time.Time

	mu   sync.Mutex // protects the fields below; serialises decisions
	busy int        // requests being served
	peak int        // the most busy has been
}

// NewInFlight returns an InFlight serving at most limit requests at once,
// each for hold. It panics if limit is not positive or hold is negative.
func NewInFlight(limit int, hold time.Duration) *InFlight {
	mustPositive("NewInFlight", "limit", limit)
	if hold < 0 {
		panic("throttletest.NewInFlight: hold must not be negative")
	}
	return &InFlight{Limit: limit, Hold: hold}
}

// Peak returns the most requests served at once so far.
func (s *InFlight) Peak() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak
}

// ServeHTTP admits r or refuses it, as the type's rule says.
func (s *InFlight) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if misconfigured(w, s.Limit <= 0, "InFlight needs a positive Limit: make it with NewInFlight") {
		return
	}
	drain(r)
	s.mu.Lock()
	t := now(s.Now)
	ok := s.busy < s.Limit
	if ok {
		s.busy++
		s.peak = max(s.peak, s.busy)
	}
	s.record(t, r.Header.Get(WorkerHeader), ok, 1)
	s.mu.Unlock()

	setDate(w.Header(), t, 0)
	if !ok {
		if s.RetryAfter {
			w.Header().Set("Retry-After", "1")
		}
		reject(w, http.StatusTooManyRequests)
		return
	}
	if s.Hold > 0 {
		timer := time.NewTimer(s.Hold)
		select {
		case <-timer.C:
		case <-r.Context().Done():
			timer.Stop()
		}
	}
	s.mu.Lock()
	s.busy--
	s.mu.Unlock()
	admit(w)
}
