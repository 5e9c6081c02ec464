package throttletest

import (
	"math"
	"net/http"
	"sync"
	"time"
)

// LeakyBucket is a strict leaky bucket with no burst, as nginx's limit_req
// without burst= enforces it: a request is admitted only if at least
// 1/Rate has passed since the last admitted one, measured on a clock of
// whole milliseconds; everything else is refused at once with Status and
// no header saying why or for how long. A client that knows the exact
// limit still draws refusals whenever two of its requests arrive a
// millisecond closer than the interval, the jitter of any real dispatch.
//
// The arithmetic is nginx's (ngx_http_limit_req_module.c): the excess, in
// thousandths of a request, is excess - rate·ms/1000 + 1000 with rate in
// thousandths of a request per second and ms the whole milliseconds since
// the last admission; a request is refused when the excess would be above
// the burst (0), and a refusal changes nothing.
//
// The zero value is not usable: every request is answered 500 with a
// message saying so. Create one with [NewLeakyBucket]; set the fields before the first
// request. It is an [http.Handler], safe for concurrent use; it records
// what it saw in its [Counter].
type LeakyBucket struct {
	Counter

	// Rate is the requests per second admitted; set by NewLeakyBucket.
	Rate float64
	// Status is the refusal's status. Zero means 503, nginx's default
	// (limit_req_status); set 429 for the usual choice.
	Status int
	// Now is the server's clock. Nil means time.Now (the fake clock
	// inside a testing/synctest bubble).
	Now func() time.Time

	mu     sync.Mutex // protects the fields below; serialises decisions
	seen   bool       // an admission happened
	lastMS int64      // the last admission, in whole milliseconds
	excess int64      // thousandths of a request, after the last admission
}

// NewLeakyBucket returns a LeakyBucket admitting perSecond requests a
// second, one at a time. It panics if perSecond is not positive.
func NewLeakyBucket(perSecond float64) *LeakyBucket {
	mustPositive("NewLeakyBucket", "perSecond", perSecond)
	return &LeakyBucket{Rate: perSecond}
}

// ServeHTTP admits r or refuses it, as the type's rule says.
func (s *LeakyBucket) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if misconfigured(w, !(s.Rate > 0), "LeakyBucket needs a positive Rate: make it with NewLeakyBucket") {
		return
	}
	drain(r)
	s.mu.Lock()
	t := now(s.Now)
	ok := s.allow(t.UnixMilli())
	s.record(t, r.Header.Get(WorkerHeader), ok, 1)
	s.mu.Unlock()
	setDate(w.Header(), t, 0)
	if !ok {
		status := s.Status
		if status == 0 {
			status = http.StatusServiceUnavailable
		}
		reject(w, status)
		return
	}
	admit(w)
}

// allow is nginx's decision for a request at ms; s.mu is held.
func (s *LeakyBucket) allow(ms int64) bool {
	if !s.seen {
		s.seen, s.lastMS, s.excess = true, ms, 0
		return true
	}
	rate := int64(s.Rate * 1000)
	elapsed := ms - s.lastMS
	if elapsed < 0 {
		elapsed = -elapsed // nginx takes the absolute value of a clock step back
	}
	var excess int64
	if elapsed == 0 || rate <= (math.MaxInt64-1000)/elapsed { // else it has long drained
		excess = max(s.excess-rate*elapsed/1000+1000, 0)
	}
	if excess > 0 { // burst 0
		return false
	}
	s.lastMS, s.excess = ms, excess
	return true
}
