package throttletest

import (
	"io"
	"net/http"
	"sync"
	"time"
)

// GitHub is a long fixed window as GitHub's REST API keeps it: Limit
// requests per Window (5,000 an hour), the window starting with the first
// request after the previous one reset. Every response carries
//
//	x-ratelimit-limit: 5000
//	x-ratelimit-remaining: 450
//	x-ratelimit-used: 4550
//	x-ratelimit-reset: 1767225600   (epoch seconds)
//	x-ratelimit-resource: core
//
// and a request past the limit is refused with Status (403, as GitHub
// mostly sends for its primary limit) and remaining 0, without
// Retry-After; with SecondaryPerMinute, a burst past it draws GitHub's
// secondary limit, the same status with Retry-After. Used and ResetIn start the server part-way through its
// first window, as a client meets an API key other programs spent from:
// Used 4550 and ResetIn 50 minutes is "450 of 5,000 left, reset in 50
// min".
//
// The zero value is not usable: every request is answered 500 with a
// message saying so. Create one with [NewGitHub]; set the fields before the first request.
// It is an [http.Handler], safe for concurrent use; it records what it saw
// in its [Counter].
type GitHub struct {
	Counter

	Limit  int           // admissions per window; set by NewGitHub
	Window time.Duration // set by NewGitHub
	// Used is what the first window has spent before the first request.
	// Zero means a fresh window.
	Used int
	// ResetIn is the time from the first request to the first window's
	// reset. Zero means Window.
	ResetIn time.Duration
	// Resource names the limit (x-ratelimit-resource). Empty means "core".
	Resource string
	// Status is the refusal's status. Zero means 403; GitHub also sends
	// 429.
	Status int
	// SecondaryPerMinute is GitHub's secondary limit: more than this many
	// admissions in any minute are refused with Status, Retry-After: 60
	// and a body saying so, the primary headers unchanged (a refusal
	// spends nothing). Zero means no secondary limit.
	SecondaryPerMinute int
	// Now is the server's clock. Nil means time.Now (the fake clock
	// inside a testing/synctest bubble).
	Now func() time.Time

	mu      sync.Mutex // protects the fields below; serialises decisions
	started bool
	reset   time.Time   // the current window's end, a whole second
	used    int         // admissions in the current window
	minute  []time.Time // admissions in the last minute, for SecondaryPerMinute
}

// NewGitHub returns a GitHub server admitting limit requests per window.
// It panics if either is not positive.
func NewGitHub(limit int, window time.Duration) *GitHub {
	mustPositive("NewGitHub", "limit", limit)
	mustPositive("NewGitHub", "window", window)
	return &GitHub{Limit: limit, Window: window}
}

// ServeHTTP admits r or refuses it, as the type's rule says.
func (s *GitHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if misconfigured(w, s.Limit <= 0 || s.Window <= 0, "GitHub needs a positive Limit and Window: make it with NewGitHub") {
		return
	}
	drain(r)
	s.mu.Lock()
	t := now(s.Now)
	switch {
	case !s.started:
		in := s.ResetIn
		if in <= 0 {
			in = s.Window
		}
		s.started, s.used, s.reset = true, min(max(s.Used, 0), s.Limit), wholeSecondAfter(t, in)
	case !t.Before(s.reset):
		s.used, s.reset = 0, wholeSecondAfter(t, s.Window)
	}
	ok := s.used < s.Limit
	secondary := false
	if ok && s.SecondaryPerMinute > 0 {
		i := 0
		for i < len(s.minute) && !s.minute[i].Add(time.Minute).After(t) {
			i++
		}
		s.minute = s.minute[i:]
		if len(s.minute) >= s.SecondaryPerMinute {
			ok, secondary = false, true
		} else {
			s.minute = append(s.minute, t)
		}
	}
	if ok {
		s.used++
	}
	used, reset := s.used, s.reset
	s.record(t, r.Header.Get(WorkerHeader), ok, 1)
	s.mu.Unlock()

	resource := s.Resource
	if resource == "" {
		resource = "core"
	}
	h := w.Header()
	setDate(h, t, 0)
	h.Set("X-Ratelimit-Limit", itoa(int64(s.Limit)))
	h.Set("X-Ratelimit-Remaining", itoa(int64(s.Limit-used)))
	h.Set("X-Ratelimit-Used", itoa(int64(used)))
	h.Set("X-Ratelimit-Reset", itoa(reset.Unix()))
	h.Set("X-Ratelimit-Resource", resource)
	if !ok {
		status := s.Status
		if status == 0 {
			status = http.StatusForbidden
		}
		h.Set("Content-Type", "application/json; charset=utf-8")
		if secondary {
			h.Set("Retry-After", "60")
			w.WriteHeader(status)
			io.WriteString(w, `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again.","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`+"\n")
			return
		}
		w.WriteHeader(status)
		io.WriteString(w, `{"message":"API rate limit exceeded","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"}`+"\n")
		return
	}
	admit(w)
}

// wholeSecondAfter is t+d rounded up to a whole second, so the epoch-second
// reset the server announces is exactly when its window ends.
func wholeSecondAfter(t time.Time, d time.Duration) time.Time {
	e := t.Add(d)
	if r := e.Truncate(time.Second); !r.Equal(e) {
		return r.Add(time.Second)
	}
	return e
}
