package throttle

import (
	"sync"
	"time"
)

// roundTrips keeps the fastest recent round trip (request sent to
// response headers) of a Transport, so that a turn that leaves less time
// before the request's deadline is not sent: the request could only time
// out, having spent the quota.
//
// The fastest, not the mean: one Transport serves many hosts, and a
// deadline closer than the fastest round trip of any of them leaves no
// time for any; a mean would fail requests to a fast host after a slow
// one. Recent: the least over the current and the previous period of
// rttPeriod, so an estimate follows a network that got slower within two
// periods.
//
// The zero value knows nothing (estimate 0); it is safe for concurrent
// use.
type roundTrips struct {
	mu        sync.Mutex    // protects the fields below
	period    int64         // the period cur counts, in rttPeriods since the Unix epoch
	cur, prev time.Duration // the fastest in the current and previous period; 0 for none
}

const rttPeriod = 10 * time.Second

// observe counts a round trip of d that ended at now.
func (r *roundTrips) observe(now time.Time, d time.Duration) {
	if d <= 0 {
		return
	}
	r.mu.Lock()
	r.roll(now)
	if r.cur == 0 || d < r.cur {
		r.cur = d
	}
	r.mu.Unlock()
}

// estimate returns the fastest round trip of the recent past, 0 if none.
func (r *roundTrips) estimate(now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.roll(now)
	switch {
	case r.cur == 0:
		return r.prev
	case r.prev == 0:
		return r.cur
	}
	return min(r.cur, r.prev)
}

// roll moves to now's period. It requires r.mu.
func (r *roundTrips) roll(now time.Time) {
	p := now.UnixNano() / int64(rttPeriod)
	switch p {
	case r.period:
	case r.period + 1:
		r.period, r.prev, r.cur = p, r.cur, 0
	default:
		r.period, r.prev, r.cur = p, 0, 0
	}
}
