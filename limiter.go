package throttle

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Rate is a token bucket's shape: Limit units per second on average, at most
// Burst at once. It uses x/time/rate's unit type, so rate.Every(time.Minute/60)
// and rate.Inf work as they do there.
type Rate struct {
	Limit rate.Limit // units per second; zero means no limit (rate.Inf)
	Burst int        // units that may be spent at once; zero means 1
}

// Limiter is an in-process, per-key set of token buckets: a host, an API key,
// a tenant, a route each get their own. It is the waiter most programs want:
//
//	lim := &throttle.Limiter{Limit: 10, Burst: 5}
//	err := lim.For("api.github.com").WaitN(ctx, 1)
//
// Most callers should use it through [Transport], or call WaitN on For(key)
// before each job that spends the quota.
//
// Waits are reservations: a wait computes its exact turn once and sleeps
// until then, callers are served in arrival order, a turn past ctx's
// deadline fails at once with [ErrWouldExceedDeadline] reserving nothing,
// and a wait whose ctx ends gives its units back exactly. A key can be
// paused ([Pauser]) when a server says its quota is spent.
//
// Memory is bounded however many distinct keys arrive: a key whose bucket is
// full again (and not paused) is indistinguishable from a new one, so it is
// forgotten losslessly when the map is swept; past MaxKeys, keys are
// forgotten even if not yet full (such a key gets a fresh burst).
//
// The bucket arithmetic is x/time/rate's (same Limit unit, same burst
// semantics) kept as a theoretical arrival time rather than in a
// rate.Limiter, because a rate.Limiter's Reservation.Cancel restores the
// wrong count when other reservations follow (golang/go#56924, #69419) and
// its time can run backwards under contention; here a refund is exact and
// the state tells at once whether a bucket is full, which lossless
// eviction needs.
//
// The zero Limiter has no limit: it only honours pauses. Set the fields
// before the first wait and do not change them after; a Limiter is safe for
// concurrent use.
type Limiter struct {
	// Limit is the rate of every key without an override, in units per
	// second. Zero means no limit (pauses are still honoured); negative is
	// an error on every wait.
	Limit rate.Limit

	// Burst is how many units a key may spend at once. Zero means 1.
	Burst int

	// Overrides sets a different Rate for particular keys, e.g.
	// {"api.github.com": {Limit: 1, Burst: 1}}. It is read at the first
	// wait; nil means none.
	Overrides map[string]Rate

	// MaxKeys bounds how many keys are remembered at once. Zero means 1<<20.
	MaxKeys int

	once    sync.Once
	epoch   time.Time       // time zero of the buckets' offsets; monotonic
	rates   map[string]Rate // copy of Overrides, read-only after once
	keys    sync.Map        // string -> *bucket
	count   atomic.Int64    // entries in keys
	next    atomic.Int64    // count at which the next sweep runs
	sweepMu sync.Mutex      // one sweep at a time
	def     *bucket         // the bucket of WaitN on the Limiter itself
}

// bucket is one key's token bucket, kept as GCRA state: tat is the
// theoretical arrival time in nanoseconds since l.epoch; the bucket is full
// when tat <= now, and a wait for n units at time now has its turn at
// max(tat, now) + n·interval - burst·interval.
type bucket struct {
	l        *Limiter
	key      string
	limit    rate.Limit // rate.Inf: no limit
	burst    int
	interval float64 // nanoseconds per unit; 0 when limit is rate.Inf

	mu     sync.Mutex // protects the fields below
	tat    float64    // theoretical arrival time, ns since epoch
	paused float64    // nothing before this, ns since epoch
	dead   bool       // evicted from l.keys: re-resolve through l

	pending  float64 // units reserved whose feedback has not come
	lastResv float64 // when the last units were reserved
	txSec    int64   // the second txCur counts
	txCur    float64 // units sent in second txSec
	txPrev   float64 // units sent in the second before

	// srv is what servers said (see Adapt) and how pauses and cuts moved
	// the queue; nil until either happens, so that a key that only waits
	// stays small and on the fast path.
	srv *serverState
}

// serverState is a bucket's state from what servers said. The bucket's mutex
// protects it.
type serverState struct {
	win       window   // the server's quota window
	adapt     adaptive // slowing down after bare rejections
	dInterval float64  // the server's declared pace, ns per unit; 0 if none
	dBurst    int
	changed   chan struct{} // closed when what the server said changes; nil if no one waits
	cuts      uint64        // moves of the queue (pauses, cuts) so far
	stretches [8]stretch    // the last moves, by cuts % 8
}

// server returns b's server state, made on first use. It requires b.mu.
func (b *bucket) server() *serverState {
	if b.srv == nil {
		b.srv = new(serverState)
	}
	return b.srv
}

func (l *Limiter) init() {
	l.epoch = time.Now()
	l.rates = make(map[string]Rate, len(l.Overrides))
	for k, r := range l.Overrides {
		l.rates[k] = r
	}
	l.next.Store(minSweep)
	if l.MaxKeys > 0 && l.MaxKeys < minSweep {
		l.next.Store(int64(l.MaxKeys))
	}
	l.def = l.newBucket("")
}

func (l *Limiter) newBucket(key string) *bucket {
	r, ok := l.rates[key]
	if !ok {
		r = Rate{Limit: l.Limit, Burst: l.Burst}
	}
	b := &bucket{l: l, key: key, limit: r.Limit, burst: r.Burst}
	if b.limit == 0 {
		b.limit = rate.Inf
	}
	if b.burst == 0 {
		b.burst = 1
	}
	if b.limit != rate.Inf && b.limit > 0 {
		b.interval = 1e9 / float64(b.limit)
	}
	return b
}

// WaitN waits for n units of the Limiter's own quota (the key ""), so that
// a Limiter is a [Waiter] like a *rate.Limiter.
func (l *Limiter) WaitN(ctx context.Context, n int) error {
	l.once.Do(l.init)
	return l.def.WaitN(ctx, n)
}

// For returns the waiter of key's quota; it also implements [Pauser]. For
// allocates only the first time a key is seen (or seen again after it was
// forgotten).
func (l *Limiter) For(key string) Waiter {
	return l.bucket(key)
}

func (l *Limiter) bucket(key string) *bucket {
	l.once.Do(l.init)
	if v, ok := l.keys.Load(key); ok {
		return v.(*bucket)
	}
	// Sweep before storing, so that the new bucket (full, so forgettable)
	// is not the one forgotten.
	if l.count.Load() >= l.next.Load() {
		l.sweep()
	}
	b := l.newBucket(key)
	if v, loaded := l.keys.LoadOrStore(key, b); loaded {
		return v.(*bucket)
	}
	l.count.Add(1)
	return b
}

// now returns the time since l.epoch in nanoseconds, read from the
// monotonic clock.
func (l *Limiter) now() float64 {
	return float64(time.Since(l.epoch))
}

// WaitN waits for n units of the bucket's quota.
func (b *bucket) WaitN(ctx context.Context, n int) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	default:
	}
	if n <= 0 {
		if n < 0 {
			return fmt.Errorf("throttle: wait for %d units of %q: %w", n, b.key, ErrInvalidLimit)
		}
		return nil
	}
	if b.limit < 0 || b.burst < 0 || math.IsNaN(float64(b.limit)) {
		return fmt.Errorf("throttle: %q has limit %v, burst %d: %w", b.key, b.limit, b.burst, ErrInvalidLimit)
	}
	if b.interval > 0 && n > b.burst {
		return fmt.Errorf("throttle: wait for %d units of %q, burst %d: %w", n, b.key, b.burst, ErrCostExceedsBurst)
	}

	for {
		b.mu.Lock()
		if b.dead {
			b.mu.Unlock()
			return b.l.bucket(b.key).WaitN(ctx, n)
		}
		now := b.l.now()
		start := max(now, b.paused)
		if b.srv != nil {
			// The server's window is spent: wait for its reset (or for a
			// response that says more), then reserve anew.
			if until, blocked := b.srv.win.admit(now, n); blocked {
				changed := b.changedLocked()
				b.mu.Unlock()
				if err := b.sleepUntil(ctx, max(until, start)-now, changed); err != nil {
					return err
				}
				continue
			}
		}
		interval, burst := b.pace(now, n)
		turn := start
		var tat float64
		if interval > 0 {
			from := max(b.tat, start)
			tat = from + float64(n)*interval
			turn = max(start, from+float64(n-burst)*interval)
		}
		var cuts uint64
		if b.srv != nil {
			turn = b.srv.win.spreadTurn(turn)
			cuts = b.srv.cuts
		}
		delay := time.Duration(math.Ceil(turn - now))
		if delay > 0 {
			if dl, ok := ctx.Deadline(); ok && delay > time.Until(dl) {
				b.mu.Unlock()
				return &DeadlineError{Key: b.key, Delay: delay}
			}
		}
		if interval > 0 {
			b.tat = tat
		}
		if b.srv != nil {
			b.srv.win.spend(turn, n)
		}
		b.countSent(now, n)
		b.notePending(now, n)
		b.mu.Unlock()
		if delay <= 0 {
			return nil
		}
		return b.sleepTurn(ctx, turn, n, interval, cuts)
	}
}

// sleepUntil sleeps d, or until changed is closed (what the server said
// changed), or until ctx ends. Nothing is reserved, so nothing is given
// back; a wake past ctx's deadline fails at once.
func (b *bucket) sleepUntil(ctx context.Context, d float64, changed <-chan struct{}) error {
	delay := time.Duration(math.Ceil(d))
	if dl, ok := ctx.Deadline(); ok && delay > time.Until(dl) {
		return &DeadlineError{Key: b.key, Delay: delay}
	}
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-changed:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// changedLocked returns a channel closed at the next change of what the
// server said. It requires b.mu.
func (b *bucket) changedLocked() <-chan struct{} {
	s := b.server()
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.changed
}

// sleepTurn sleeps until a reserved turn. If ctx ends first, the n units
// (reserved at interval) are given back. A wait queued when the pace was
// cut (cuts changed) moves its turn as the cut stretched the queue, and a
// pause that came while it slept holds it off too.
func (b *bucket) sleepTurn(ctx context.Context, turn float64, n int, interval float64, cuts uint64) error {
	t := time.NewTimer(time.Duration(math.Ceil(turn - b.l.now())))
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-ctx.Done():
			b.refund(n, interval)
			return ctx.Err()
		}
		b.mu.Lock()
		now, wake := b.l.now(), b.paused
		if b.srv != nil {
			wake = max(wake, b.srv.stretched(turn, cuts))
			cuts = b.srv.cuts
		}
		b.mu.Unlock()
		if wake <= now {
			return nil
		}
		delay := time.Duration(math.Ceil(wake - now))
		if dl, ok := ctx.Deadline(); ok && delay > time.Until(dl) {
			b.refund(n, interval)
			return &DeadlineError{Key: b.key, Delay: delay}
		}
		t.Reset(delay)
	}
}

// refund gives back the n units of a reservation that will not be used.
// Taking n·interval off the arrival time is exact: later reservations keep
// their turns, and the units go to the next caller.
func (b *bucket) refund(n int, interval float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dead {
		return
	}
	b.tat -= float64(n) * interval
	b.pending = max(b.pending-float64(n), 0)
	if b.srv != nil && b.srv.win.valid {
		b.srv.win.remaining += float64(n)
	}
}

// Pause holds off every caller of the key until d from now. A pause never
// shortens a longer one. It does not block and never fails.
func (b *bucket) Pause(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	b.mu.Lock()
	if b.dead {
		b.mu.Unlock()
		return b.l.bucket(b.key).Pause(ctx, d)
	}
	b.pauseLocked(b.l.now(), float64(d))
	b.mu.Unlock()
	return nil
}

// pauseLocked holds off the key until now+d. The turns already reserved
// after the pause's start move back by its length, keeping their spacing,
// so that they do not all go at once when it ends. It requires b.mu.
func (b *bucket) pauseLocked(now, d float64) {
	until := now + d
	if until <= b.paused {
		return
	}
	at := max(b.paused, now)
	interval, burst := b.pace(now, 1)
	// The last reserved turn is tat - burst·interval: is it still to come?
	if b.tat-float64(burst)*interval > at {
		b.shiftQueue(stretch{at: at, ratio: 1, shift: until - at})
	}
	b.paused = until
}

// Pause holds off every caller of the Limiter's own quota (key "").
func (l *Limiter) Pause(ctx context.Context, d time.Duration) error {
	l.once.Do(l.init)
	return l.def.Pause(ctx, d)
}

// Len reports how many keys the Limiter remembers now.
func (l *Limiter) Len() int {
	return int(l.count.Load())
}
