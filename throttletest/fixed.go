package throttletest

import (
	"fmt"
	"net/http"
	"sync"
	"time"
)

// FixedWindow admits Limit requests per window of length Window, the
// windows aligned to the clock (a 1 s window starts on each whole
// second), and announces it with the IETF fields of
// draft-ietf-httpapi-ratelimit-headers (draft-08 to -11):
//
//	RateLimit-Policy: "default";q=100;w=1
//	RateLimit: "default";r=42;t=1
//
// r is what remains in the current window and t the seconds until it
// resets, a delay-seconds Integer, rounded up: a reset 0.1 s away is
// announced as t=1, so a client believing t waits up to a second too long.
// A refusal is a 429 with r=0 (and Retry-After when RetryAfter is set).
// DateSkew moves the Date header off the server's clock, as a server whose
// clock is off sends it.
//
// The zero value is not usable: every request is answered 500 with a
// message saying so. Create one with [NewFixedWindow]; set the fields before the first
// request. It is an [http.Handler], safe for concurrent use; it records
// what it saw in its [Counter].
type FixedWindow struct {
	Counter

	Limit  int           // admissions per window; set by NewFixedWindow
	Window time.Duration // the window's length, whole seconds; set by NewFixedWindow
	// Name is the policy's name in both fields. Empty means "default".
	Name string
	// RetryAfter adds Retry-After (the same rounded-up seconds as t) to a
	// refusal. False means the RateLimit fields alone say when.
	RetryAfter bool
	// DateSkew is added to the server's clock in the Date header. Zero
	// means a correct Date.
	DateSkew time.Duration
	// Now is the server's clock. Nil means time.Now (the fake clock
	// inside a testing/synctest bubble).
	Now func() time.Time

	mu    sync.Mutex // protects the fields below; serialises decisions
	start time.Time  // the current window's start
	used  int        // admissions in it
}

// NewFixedWindow returns a FixedWindow admitting limit requests per
// window. It panics if limit is not positive or window is not a positive
// whole number of seconds (the IETF w parameter is one).
func NewFixedWindow(limit int, window time.Duration) *FixedWindow {
	mustPositive("NewFixedWindow", "limit", limit)
	mustPositive("NewFixedWindow", "window", window)
	if window%time.Second != 0 {
		panic("throttletest.NewFixedWindow: window must be whole seconds")
	}
	return &FixedWindow{Limit: limit, Window: window}
}

// ServeHTTP admits r or refuses it, as the type's rule says.
func (s *FixedWindow) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if misconfigured(w, s.Limit <= 0 || s.Window <= 0 || s.Window%time.Second != 0, "FixedWindow needs a positive Limit and a Window of whole seconds: make it with NewFixedWindow") {
		return
	}
	drain(r)
	s.mu.Lock()
	t := now(s.Now)
	if start := t.Truncate(s.Window); !start.Equal(s.start) {
		s.start, s.used = start, 0
	}
	ok := s.used < s.Limit
	if ok {
		s.used++
	}
	left, reset := s.Limit-s.used, s.start.Add(s.Window).Sub(t)
	s.record(t, r.Header.Get(WorkerHeader), ok, 1)
	s.mu.Unlock()

	name := s.Name
	if name == "" {
		name = "default"
	}
	h := w.Header()
	setDate(h, t, s.DateSkew)
	secs := max(ceilSeconds(reset), 1)
	h.Set("RateLimit-Policy", fmt.Sprintf("%q;q=%d;w=%d", name, s.Limit, int64(s.Window/time.Second)))
	h.Set("RateLimit", fmt.Sprintf("%q;r=%d;t=%d", name, left, secs))
	if !ok {
		if s.RetryAfter {
			h.Set("Retry-After", itoa(secs))
		}
		reject(w, http.StatusTooManyRequests)
		return
	}
	admit(w)
}
