package throttletest

import (
	"net/http"
	"sync"
	"time"
)

// TokenBucket admits Rate requests a second on average and Burst at once,
// as API gateways do (and as x/time/rate's Limiter would): the bucket holds
// up to Burst tokens, refills continuously, and a request takes one or is
// refused with a 429. When RetryAfter is set the refusal carries
// Retry-After, the whole seconds (rounded up, at least 1) until a token is
// back; otherwise it says nothing.
//
// The zero value is not usable: every request is answered 500 with a
// message saying so. Create one with [NewTokenBucket]; set the fields before the first
// request. It is an [http.Handler], safe for concurrent use; it records
// what it saw in its [Counter].
type TokenBucket struct {
	Counter

	Rate  float64 // tokens a second; set by NewTokenBucket
	Burst int     // the bucket's size; set by NewTokenBucket
	// RetryAfter adds Retry-After to a refusal. False means a bare 429.
	RetryAfter bool
	// Now is the server's clock. Nil means time.Now (the fake clock
	// inside a testing/synctest bubble).
	Now func() time.Time

	mu      sync.Mutex // protects the fields below; serialises decisions
	started bool
	at      time.Time // when tokens was last brought up to date
	tokens  float64
}

// NewTokenBucket returns a TokenBucket of perSecond requests a second and
// burst at once. It panics if either is not positive.
func NewTokenBucket(perSecond float64, burst int) *TokenBucket {
	mustPositive("NewTokenBucket", "perSecond", perSecond)
	mustPositive("NewTokenBucket", "burst", burst)
	return &TokenBucket{Rate: perSecond, Burst: burst}
}

// ServeHTTP admits r or refuses it, as the type's rule says.
func (s *TokenBucket) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if misconfigured(w, !(s.Rate > 0) || s.Burst <= 0, "TokenBucket needs a positive Rate and Burst: make it with NewTokenBucket") {
		return
	}
	drain(r)
	s.mu.Lock()
	t := now(s.Now)
	if !s.started {
		s.started, s.tokens = true, float64(s.Burst)
	} else if d := t.Sub(s.at); d > 0 {
		s.tokens = min(s.tokens+d.Seconds()*s.Rate, float64(s.Burst))
	}
	s.at = t
	ok := s.tokens >= 1
	var wait time.Duration
	if ok {
		s.tokens--
	} else {
		wait = time.Duration((1 - s.tokens) / s.Rate * float64(time.Second))
	}
	s.record(t, r.Header.Get(WorkerHeader), ok, 1)
	s.mu.Unlock()

	setDate(w.Header(), t, 0)
	if !ok {
		if s.RetryAfter {
			w.Header().Set("Retry-After", itoa(max(ceilSeconds(wait), 1)))
		}
		reject(w, http.StatusTooManyRequests)
		return
	}
	admit(w)
}
