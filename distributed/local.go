package distributed

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/throttle-go/throttle"
	"golang.org/x/time/rate"
)

// maxLocalBuckets bounds the fallback buckets a Quota keeps. Beyond it,
// buckets that are full (idle) are dropped, then any; a dropped bucket
// comes back full, which allows one extra local burst for that key.
const maxLocalBuckets = 4096

// localBuckets holds the in-process buckets [FailLocal] falls back to, one
// per key, created on first use. Safe for concurrent use.
type localBuckets struct {
	mu sync.Mutex               // protects m
	m  map[string]*rate.Limiter // by user key
}

// get returns key's bucket at limit/workers with burst ceil(burst/workers).
// The bucket's capacity is the full burst so that any cost the shared quota
// accepts is accepted here, but it starts with only the local share of it.
func (l *localBuckets) get(key string, limit rate.Limit, burst, workers int, now time.Time) *rate.Limiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	if lim, ok := l.m[key]; ok {
		return lim
	}
	if l.m == nil {
		l.m = make(map[string]*rate.Limiter)
	}
	if len(l.m) >= maxLocalBuckets {
		l.evict(now)
	}
	share := int(math.Ceil(float64(burst) / float64(workers)))
	lim := rate.NewLimiter(limit/rate.Limit(workers), burst)
	lim.ReserveN(now, burst-share) // start with the local share only
	l.m[key] = lim
	return lim
}

// reset drops every bucket.
func (l *localBuckets) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	clear(l.m)
}

// evict drops idle buckets, or every bucket if none is idle. l.mu is held.
func (l *localBuckets) evict(now time.Time) {
	for k, lim := range l.m {
		if lim.TokensAt(now) >= float64(lim.Burst()) {
			delete(l.m, k)
		}
	}
	if len(l.m) >= maxLocalBuckets {
		clear(l.m)
	}
}

// waitLocal waits for n units of lim with the same contract as a shared
// wait: a turn past ctx's deadline is refused at once and reserves nothing;
// a cancelled wait gives its units back. now is the waiter's clock.
func waitLocal(ctx context.Context, lim *rate.Limiter, key string, n int, now func() time.Time) error {
	t := now()
	r := lim.ReserveN(t, n)
	if !r.OK() { // n > burst: checked before, so only on a misconfigured rate
		return throttle.ErrCostExceedsBurst
	}
	delay := r.DelayFrom(t)
	if deadline, ok := ctx.Deadline(); ok && delay > time.Until(deadline) {
		r.CancelAt(t)
		return &throttle.DeadlineError{Key: key, Delay: delay}
	}
	if delay == 0 {
		return nil
	}
	timer := time.NewTimer(delay)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		r.CancelAt(now())
		return ctx.Err()
	}
}
