package throttletest

import (
	"math"
	"net/http"
	"sync"
	"time"
)

// SlidingWindow is a sliding-window counter, as go-chi/httprate keeps it
// (after Cloudflare's design): windows of length Window aligned to the
// clock, and a request at a fraction f into the current window is refused
// when round(previous·(1−f) + current) ≥ Limit, previous and current being
// the admissions of the previous and the current window. Every response
// carries X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset
// (the current window's end, in epoch seconds, or with ResetDelta the
// seconds until it); a refusal is a 429 with
// Retry-After: the window's length in seconds ("1" for a 1 s window).
//
// It admits about Limit per Window in steady state, and bursts are
// smoothed: after a full window, the next admits only what the previous
// one's weight has left.
//
// The zero value is not usable: every request is answered 500 with a
// message saying so. Create one with [NewSlidingWindow]; set the fields before the first
// request. It is an [http.Handler], safe for concurrent use; it records
// what it saw in its [Counter].
type SlidingWindow struct {
	Counter

	Limit  int           // admissions per Window; set by NewSlidingWindow
	Window time.Duration // the window's length; set by NewSlidingWindow
	// ResetDelta sends X-RateLimit-Reset as the seconds until the
	// window's end, rounded up, as many APIs do. False means epoch
	// seconds, as httprate does.
	ResetDelta bool
	// Now is the server's clock. Nil means time.Now (the fake clock
	// inside a testing/synctest bubble).
	Now func() time.Time

	mu         sync.Mutex // protects the fields below; serialises decisions
	start      time.Time  // the current window's start
	prev, curr int        // admissions of the previous and current window
}

// NewSlidingWindow returns a SlidingWindow admitting about limit requests
// per window. It panics if either is not positive.
func NewSlidingWindow(limit int, window time.Duration) *SlidingWindow {
	mustPositive("NewSlidingWindow", "limit", limit)
	mustPositive("NewSlidingWindow", "window", window)
	return &SlidingWindow{Limit: limit, Window: window}
}

// ServeHTTP admits r or refuses it, as the type's rule says.
func (s *SlidingWindow) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if misconfigured(w, s.Limit <= 0 || s.Window <= 0, "SlidingWindow needs a positive Limit and Window: make it with NewSlidingWindow") {
		return
	}
	drain(r)
	s.mu.Lock()
	t := now(s.Now)
	start := t.Truncate(s.Window)
	switch {
	case start.Equal(s.start):
	case start.Equal(s.start.Add(s.Window)):
		s.prev, s.curr, s.start = s.curr, 0, start
	default: // a window or more went by with nothing
		s.prev, s.curr, s.start = 0, 0, start
	}
	f := float64(t.Sub(start)) / float64(s.Window)
	n := int(math.Round(float64(s.prev)*(1-f) + float64(s.curr)))
	ok := n < s.Limit
	if ok {
		s.curr++
		n++
	}
	s.record(t, r.Header.Get(WorkerHeader), ok, 1)
	s.mu.Unlock()

	h := w.Header()
	setDate(h, t, 0)
	h.Set("X-RateLimit-Limit", itoa(int64(s.Limit)))
	h.Set("X-RateLimit-Remaining", itoa(int64(max(s.Limit-n, 0))))
	if s.ResetDelta {
		h.Set("X-RateLimit-Reset", itoa(max(ceilSeconds(start.Add(s.Window).Sub(t)), 1)))
	} else {
		h.Set("X-RateLimit-Reset", itoa(start.Add(s.Window).Unix()))
	}
	if !ok {
		h.Set("Retry-After", itoa(max(ceilSeconds(s.Window), 1)))
		reject(w, http.StatusTooManyRequests)
		return
	}
	admit(w)
}
