package throttletest

import (
	"net/http"
	"sync"
	"time"
)

// SlidingLog admits at most Limit requests in any interval of length
// Window (a sliding log: it remembers each admission for Window). It says
// nothing of its limit: an admission carries no rate-limit header, a
// refusal is a 429 with only Retry-After, the whole seconds until the
// oldest admission in the log leaves it (at least 1). It is the hidden
// budget a client meets when it was told a higher limit than the server
// grants, or when other clients spend the same budget.
//
// The zero value is not usable: every request is answered 500 with a
// message saying so. Create one with [NewSlidingLog]; set the fields before the first
// request. It is an [http.Handler], safe for concurrent use; it records
// what it saw in its [Counter].
type SlidingLog struct {
	Counter

	Limit  int           // admissions in any Window; set by NewSlidingLog
	Window time.Duration // set by NewSlidingLog
	// Now is the server's clock. Nil means time.Now (the fake clock
	// inside a testing/synctest bubble).
	Now func() time.Time

	mu  sync.Mutex  // protects log; serialises decisions
	log []time.Time // admissions less than Window ago, oldest first
}

// NewSlidingLog returns a SlidingLog admitting at most limit requests in
// any window. It panics if either is not positive.
func NewSlidingLog(limit int, window time.Duration) *SlidingLog {
	mustPositive("NewSlidingLog", "limit", limit)
	mustPositive("NewSlidingLog", "window", window)
	return &SlidingLog{Limit: limit, Window: window}
}

// ServeHTTP admits r or refuses it, as the type's rule says.
func (s *SlidingLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if misconfigured(w, s.Limit <= 0 || s.Window <= 0, "SlidingLog needs a positive Limit and Window: make it with NewSlidingLog") {
		return
	}
	drain(r)
	s.mu.Lock()
	t := now(s.Now)
	i := 0
	for i < len(s.log) && !s.log[i].Add(s.Window).After(t) {
		i++
	}
	s.log = s.log[i:]
	ok := len(s.log) < s.Limit
	var wait time.Duration
	if ok {
		s.log = append(s.log, t)
	} else {
		wait = s.log[0].Add(s.Window).Sub(t)
	}
	s.record(t, r.Header.Get(WorkerHeader), ok, 1)
	s.mu.Unlock()

	h := w.Header()
	setDate(h, t, 0)
	if !ok {
		h.Set("Retry-After", itoa(max(ceilSeconds(wait), 1)))
		reject(w, http.StatusTooManyRequests)
		return
	}
	admit(w)
}
