package distributed

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttle-go/throttle"
)

// DefaultLeaseTTL is how long an in-flight lease lives without renewal
// when [Limiter.LeaseTTL] is zero.
const DefaultLeaseTTL = 30 * time.Second

// The in-flight script's replies (prepended to it as Lua constants).
const (
	leaseWaiting  = 0 // queued: ask again when woken
	leaseGranted  = 1 // the units are held
	leaseReleased = 2 // the token was given back (or a release's reply)
	leaseMismatch = 3 // another cap under the same Version: {3, cap, version}
)

//go:embed inflight.lua
var inflightSrc string

// inflightScript is a key's in-flight cap: leases and the queue of
// acquisitions waiting (see inflight.lua), its constants prepended from
// the Go source.
var inflightScript = redis.NewScript(fmt.Sprintf(
	"-- constants from inflight.go\nlocal WAITING = %d\nlocal GRANTED = %d\nlocal RELEASED = %d\nlocal MISMATCH = %d\n",
	leaseWaiting, leaseGranted, leaseReleased, leaseMismatch) + inflightSrc)

// inflightKeys returns the Redis keys of the in-flight cap of rkey's
// quota key: rkey with a suffix after its closing brace, so that the hash
// tag, and the Cluster slot, are the schedule's (see redisKey); the
// schedule's own key ends at the brace, so none of these is it.
func inflightKeys(rkey string) []string {
	return []string{rkey + ":lease", rkey + ":queue", rkey + ":queued", rkey + ":released", rkey + ":cap"}
}

// minLeaseTTL is the shortest LeaseTTL used: a shorter one would have
// the renewer call Redis in a loop.
const minLeaseTTL = 10 * time.Millisecond

// leaseTTL returns LeaseTTL or its default.
func (q *Limiter) leaseTTL() time.Duration {
	if q.LeaseTTL > 0 {
		return max(q.LeaseTTL, minLeaseTTL)
	}
	return DefaultLeaseTTL
}

// leaseReply is the script's answer.
type leaseReply struct {
	status int64
	wake   time.Duration // until the earliest lease expires; < 0: none
}

// lease calls the in-flight script's op with tokens.
func (w *keyWaiter) lease(ctx context.Context, op string, tokens ...string) (leaseReply, error) {
	q := w.q
	args := make([]any, 0, 5+len(tokens))
	args = append(args, op, q.InFlight, q.Version, q.leaseTTL().Microseconds(), w.channel)
	for _, t := range tokens {
		args = append(args, t)
	}
	cmd, err := q.call(ctx, w.key, inflightScript, w.lkeys, args...)
	if err != nil {
		return leaseReply{}, err
	}
	v, err := cmd.Int64Slice()
	if err != nil || len(v) != 4 {
		return leaseReply{}, fmt.Errorf("unexpected reply %v from the in-flight script", cmd.Val())
	}
	if v[0] == leaseMismatch {
		return leaseReply{}, fmt.Errorf("throttle/distributed: quota %q, key %q: this process has in-flight cap %d (Version %d); "+
			"the key's leases in Redis were taken under cap %d (Version %d). Give every process sharing the quota the same "+
			"InFlight, or raise Version to replace it: %w", q.name, w.key, q.InFlight, q.Version, v[1], v[2], ErrConfigMismatch)
	}
	r := leaseReply{status: v[0], wake: -1}
	if v[1] >= 0 {
		r.wake = usDuration(v[1])
	}
	return r, nil
}

// Acquire takes n units under the key's in-flight cap, for the whole
// fleet: see [throttle.Quota] and [Limiter.InFlight]. An acquisition that
// blocked 1ms or more is reported as an [throttle.EventInFlight] to
// OnEvent and to the function of ctx ([throttle.WithEvents]).
func (w *keyWaiter) Acquire(ctx context.Context, n int) (func(), error) {
	q := w.q
	switch {
	case n < 0:
		return nil, fmt.Errorf("%w: acquire %d units in flight", throttle.ErrInvalidLimit, n)
	case q.InFlight <= 0 || n == 0:
		return noRelease, nil
	case n > q.InFlight:
		return nil, fmt.Errorf("%w: acquire %d units of %q, in-flight cap %d", throttle.ErrCostExceedsBurst, n, w.key, q.InFlight)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	tok := q.slots.token(n)
	// Listening before the call: a grant pushed while the reply is on
	// its way is not missed (the grant of this acquisition is pushed to
	// it alone: see inflight.lua). Listening after it, a push in between
	// would be seen only as some push on the quota's channel, and on a
	// busy channel that made one waiter in two ask again for nothing.
	s := q.pushes.add(q, w.lkeys[0]+"|"+tok)
	defer q.pushes.remove(s)
	_, sub := q.pushes.mark()
	r, err := w.lease(ctx, "acquire", tok)
	if err != nil {
		return w.acquireFailed(ctx, tok, n, err)
	}
	if r.status == leaseGranted {
		return w.held(tok), nil
	}
	start := time.Now()
	release, err := w.awaitLease(ctx, s, tok, n, r, sub)
	if d := time.Since(start); d >= time.Millisecond {
		q.emitCall(ctx, throttle.Event{Kind: throttle.EventInFlight, Key: w.key, Delay: d, Err: err})
	}
	return release, err
}

func noRelease() {}

// NoInFlightCap reports whether the Limiter has no in-flight cap
// (InFlight is zero, as it stays after first use): Acquire then holds
// nothing, and a [throttle.Transport] neither calls it nor wraps a
// response's body to release it.
func (w *keyWaiter) NoInFlightCap() bool {
	return w.q.InFlight <= 0
}

// awaitLease sleeps until the queued acquisition tok is granted: woken
// by a push to s (its units granted, by a release or by a call that
// found a lease expired, in any process), at the earliest lease's
// expiry, and at half the TTL at the latest (asking again renews its
// place in the queue). While the subscription to pushes is not up, it
// asks again after 5ms, doubling up to pushRetry: a push it could miss
// then would leave it asleep until a lease expires. If ctx ends, its
// place (or the units granted meanwhile) is given back in the
// background.
func (w *keyWaiter) awaitLease(ctx context.Context, s *sleeper, tok string, n int, r leaseReply, sub subState) (func(), error) {
	q := w.q
	ttl := q.leaseTTL()
	down := 5 * time.Millisecond // the next ask while not subscribed
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := ttl / 2
		if r.wake >= 0 {
			next = min(next, r.wake)
		}
		if _, now := q.pushes.mark(); !sub.up || !now.up || now.epoch != sub.epoch {
			// Not subscribed since before the last ask: a grant could
			// have been missed.
			next = min(next, down)
			down = min(2*down, pushRetry)
		}
		timer.Reset(next)
		select {
		case <-timer.C:
		case <-s.sig:
		case <-ctx.Done():
			w.giveBackLease(ctx, tok)
			return nil, ctx.Err()
		}
		_, sub = q.pushes.mark()
		var err error
		r, err = w.lease(context.WithoutCancel(ctx), "acquire", tok)
		switch {
		case err == nil && r.status == leaseGranted:
			return w.held(tok), nil
		case ctx.Err() != nil:
			w.giveBackLease(ctx, tok)
			return nil, ctx.Err()
		case err != nil:
			return w.acquireFailed(ctx, tok, n, err)
		case r.status != leaseWaiting:
			w.giveBackLease(ctx, tok)
			return nil, fmt.Errorf("unexpected status %d from the in-flight script", r.status)
		}
	}
}

// acquireFailed applies the FailMode to an acquisition the store could
// not serve; the call may have reached Redis, so its token is given back
// (a release that arrives first leaves a tombstone the late call meets).
func (w *keyWaiter) acquireFailed(ctx context.Context, tok string, n int, cause error) (func(), error) {
	q := w.q
	w.giveBackLease(ctx, tok)
	if errCaller(ctx, cause) || answered(cause) {
		return nil, cause
	}
	q.fellBack(ctx, w.key, cause)
	switch q.FailMode {
	case FailOpen:
		return noRelease, nil
	case FailClosed:
		return nil, unavailable(cause)
	}
	// FailLocal: this process's share of the cap, at least one unit.
	share := int(math.Ceil(float64(q.InFlight) / float64(max(1, q.Workers))))
	q.localCapOnce.Do(func() { q.localCap = &throttle.Limiter{InFlight: share, MaxKeys: maxLocalBuckets} })
	return q.localCap.For(w.key).Acquire(ctx, min(n, share))
}

// giveBackLease releases tok in the background (best effort, bounded by
// Timeout): a lease or a place in the queue, or a tombstone for a call
// still on its way.
func (w *keyWaiter) giveBackLease(ctx context.Context, tok string) {
	w.q.refunds.Go(func() { _, _ = w.lease(context.WithoutCancel(ctx), "release", tok) })
}

// held returns the release of the lease tok, which this process renews
// until then.
func (w *keyWaiter) held(tok string) func() {
	q := w.q
	q.slots.add(w, tok)
	var once sync.Once
	return func() {
		once.Do(func() {
			q.slots.remove(w.lkeys[0], tok)
			w.giveBackLease(context.Background(), tok)
		})
	}
}

// slotLeases are the in-flight leases this process holds for one Limiter, and
// the one goroutine that renews them: every TTL/3, one script call per
// key renews all of the key's leases. A goroutine per lease would cost a
// call per lease per period, and a timer per lease as much; one per
// Limiter costs a call per key, however many requests are in flight. It
// runs only while leases are held (the last release stops it) and
// Limiter.Close stops it, so no goroutine outlives the leases.
type slotLeases struct {
	mu   sync.Mutex            // protects the fields below
	id   string                // this process's part of every token
	seq  uint64                // tokens made
	keys map[string]*leasedKey // by lease key (the key's first Redis key)
	stop chan struct{}         // closed to stop the renewer; nil if none runs
	done chan struct{}         // closed when the renewer has returned
}

// leasedKey is one key's leases held by this process.
type leasedKey struct {
	w      *keyWaiter
	tokens map[string]struct{}
}

// token returns a new token for n units: unique across processes (a
// random id per Limiter) and in this one (a counter).
func (l *slotLeases) token(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.id == "" {
		var b [8]byte
		rand.Read(b[:])
		l.id = hex.EncodeToString(b[:])
	}
	l.seq++
	return strconv.Itoa(n) + ":" + l.id + "." + strconv.FormatUint(l.seq, 36)
}

// add records a lease to renew, starting the renewer if none runs.
func (l *slotLeases) add(w *keyWaiter, tok string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.keys == nil {
		l.keys = make(map[string]*leasedKey)
	}
	k := l.keys[w.lkeys[0]]
	if k == nil {
		k = &leasedKey{w: w, tokens: make(map[string]struct{})}
		l.keys[w.lkeys[0]] = k
	}
	k.tokens[tok] = struct{}{}
	if l.stop == nil {
		l.stop, l.done = make(chan struct{}), make(chan struct{})
		go l.renew(w.q, l.stop, l.done)
	}
}

// remove stops renewing a lease; the last one stops the renewer (without
// waiting for it: a release does not block).
func (l *slotLeases) remove(lkey, tok string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := l.keys[lkey]
	if k == nil {
		return
	}
	delete(k.tokens, tok)
	if len(k.tokens) == 0 {
		delete(l.keys, lkey)
	}
	if len(l.keys) == 0 && l.stop != nil {
		close(l.stop)
		l.stop = nil
	}
}

// close stops the renewer and waits for it. Leases still held are no
// longer renewed: they expire within the TTL unless released.
func (l *slotLeases) close() {
	l.mu.Lock()
	if l.stop != nil {
		close(l.stop)
		l.stop = nil
	}
	done := l.done
	l.mu.Unlock()
	if done != nil {
		<-done
	}
}

// renew renews every lease held, every TTL/3, until stop.
func (l *slotLeases) renew(q *Limiter, stop, done chan struct{}) {
	defer close(done)
	t := time.NewTimer(q.leaseTTL() / 3)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		l.mu.Lock()
		batch := make(map[*keyWaiter][]string, len(l.keys))
		for _, k := range l.keys {
			for tok := range k.tokens {
				batch[k.w] = append(batch[k.w], tok)
			}
		}
		l.mu.Unlock()
		for w, toks := range batch {
			// A renewal that fails (Redis away) is tried again next
			// period; a lease not renewed within the TTL is lost, and
			// its units may go to another process.
			_, _ = w.lease(context.Background(), "renew", toks...)
		}
		t.Reset(q.leaseTTL() / 3)
	}
}
