package distributed

import (
	"context"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/throttle-go/throttle"
	"golang.org/x/time/rate"
)

// maxLocalBuckets bounds the fallback buckets a Limiter keeps. Beyond it,
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
// a cancelled wait gives its units back. now is the waiter's clock. What
// this process knows of the key (memo) holds the local turn too: nothing
// before the last turn Redis gave this process, nor inside a pause it
// knows; and the local turn is remembered, so that Redis, when it is back
// with the state lost, learns it (see memos).
func waitLocal(ctx context.Context, lim *rate.Limiter, key string, n int, now func() time.Time, m *memos, rkey string) error {
	t := now()
	r := lim.ReserveN(t, n)
	if !r.OK() { // n > burst: checked before, so only on a misconfigured rate
		return throttle.ErrCostExceedsBurst
	}
	at := t.Add(r.DelayFrom(t))
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for first := true; ; first = false {
		// Not before this process's last turn from Redis, which moves
		// earlier when Redis moves it (a window that rolled, a refund):
		// the wait looks again then.
		nb, moved := m.notBeforeMoved(rkey)
		wake := at
		if nb.After(wake) {
			wake = nb
		}
		delay := wake.Sub(now())
		if first {
			if deadline, ok := ctx.Deadline(); ok && delay > time.Until(deadline) {
				r.CancelAt(t)
				return &throttle.DeadlineError{Key: key, Delay: delay}
			}
			// The local turn, remembered from now on: a state Redis lost
			// takes it on (see memos).
			m.local(rkey, at)
		}
		if delay <= 0 {
			return nil
		}
		if timer == nil {
			timer = time.NewTimer(delay)
		} else {
			timer.Reset(delay)
		}
		select {
		case <-timer.C:
			return nil
		case <-moved:
		case <-ctx.Done():
			r.CancelAt(now())
			return ctx.Err()
		}
	}
}

// maxMemos bounds the keys a Limiter remembers; beyond it, entries whose
// turn and pause are past are dropped, then any.
const maxMemos = 4096

// memo is what this process knows of one key: the id of the state its
// last ticket came from (0: none yet), the turn of that ticket, its local
// turns, and a pause, on this process's clock.
type memo struct {
	id    int64
	idArg any // id as the script's argument (decimal), boxed once per id
	// last is the turn of this process's last ticket (lastQ, lastEnd) of
	// state id as it was last learned: it moves earlier when that
	// ticket's turn does (a window that rolled, a refund ahead), and to
	// when it went once it has; a turn of another state (lost) stays as
	// a bound. moved, if not nil, is closed when last moves earlier.
	last    time.Time
	lastQ   int
	lastEnd int64
	moved   chan struct{}
	local   time.Time // the last turn FailLocal gave
	hold    time.Time
	// learned: the reset of the key's learned budget's window, as the
	// last wait heard it (zero: none); a response to a unit sent past it
	// is told to the script (Observe).
	learned time.Time
}

// drop wakes the waits that wait for m to move (it is forgotten).
func (m *memo) drop() {
	if m.moved != nil {
		close(m.moved)
	}
}

// bound returns the later of the last turns, Redis's and local.
func (m *memo) bound() time.Time {
	if m.local.After(m.last) {
		return m.local
	}
	return m.last
}

// memos carries what this process knows of each key across an outage,
// both ways: a FailLocal wait takes no turn before the last one Redis gave
// this process nor inside a pause it knows, and when Redis is back with
// the key's state lost (a restart, an eviction, a failover), the first
// wait tells the script this process's last turn (Redis's or local) and
// its pause, which the new state takes on. Safe for concurrent use.
type memos struct {
	mu sync.Mutex      // protects m
	m  map[string]memo // by Redis key
	// anyLearned: some key's memo has had a learned budget's window, so
	// that a process with none (the common case) asks nothing of m for
	// it on every wait and every response.
	anyLearned atomic.Bool
}

func (ms *memos) get(rkey string) memo {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return ms.m[rkey]
}

func (ms *memos) set(rkey string, f func(*memo)) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.m == nil {
		ms.m = make(map[string]memo)
	}
	m, ok := ms.m[rkey]
	if !ok && len(ms.m) >= maxMemos {
		now := time.Now()
		for k, v := range ms.m {
			if v.bound().Before(now) && v.hold.Before(now) {
				v.drop()
				delete(ms.m, k)
			}
		}
		if len(ms.m) >= maxMemos {
			for _, v := range ms.m {
				v.drop()
			}
			clear(ms.m)
		}
	}
	f(&m)
	ms.m[rkey] = m
}

// ticket records the turn at of the ticket (qi, end) of state id, as
// Redis gave it or moved it, or when it went. The last ticket's turn is
// the process's last turn, also when it moved earlier; an earlier
// ticket's moves it later only (it cannot come after the last's).
func (ms *memos) ticket(rkey string, id int64, qi int, end int64, at time.Time) {
	ms.set(rkey, func(m *memo) {
		switch {
		case id != m.id:
			m.id, m.idArg = id, strconv.FormatInt(id, 10)
			m.lastQ, m.lastEnd = qi, end
			if at.After(m.last) {
				m.last = at
			}
		case m.lastQ == queueRetry && qi != queueRetry || qi == m.lastQ && end >= m.lastEnd:
			// Behind the last ticket: first attempts behind retries, and
			// a ticket behind it in its queue (between classes, the
			// merge decides: only a later turn is then the last).
			if at.Before(m.last) && m.moved != nil {
				close(m.moved)
				m.moved = nil
			}
			m.last, m.lastQ, m.lastEnd = at, qi, end
		case at.After(m.last):
			m.last = at
		}
	})
}

// state records the id of the key's state, as a call that kept no ticket
// saw it.
func (ms *memos) state(rkey string, id int64) {
	ms.set(rkey, func(m *memo) {
		if id != m.id {
			m.id, m.idArg = id, strconv.FormatInt(id, 10)
			m.lastQ, m.lastEnd = 0, 0
		}
	})
}

// local records a turn at t that FailLocal gave.
func (ms *memos) local(rkey string, t time.Time) {
	ms.set(rkey, func(m *memo) {
		if t.After(m.local) {
			m.local = t
		}
	})
}

// pause records a pause until t.
func (ms *memos) pause(rkey string, t time.Time) {
	ms.set(rkey, func(m *memo) {
		if t.After(m.hold) {
			m.hold = t
		}
	})
}

// learnedSlack: a unit sent this much before a learned budget's window's
// reset, as a reply put it on this process's clock, may be past it on
// Redis's: the reply's µs count from when Redis ran the script, not from
// when the reply came.
const learnedSlack = 10 * time.Millisecond

// learn records the reset of the key's learned budget's window (zero:
// none). A key without one, the common case, writes nothing.
func (ms *memos) learn(rkey string, t time.Time) {
	if t.IsZero() && (!ms.anyLearned.Load() || ms.get(rkey).learned.IsZero()) {
		return
	}
	ms.anyLearned.Store(true)
	ms.set(rkey, func(m *memo) { m.learned = t })
}

// learnedReset returns the reset of the key's learned budget's window as
// the last reply put it (zero: none).
func (ms *memos) learnedReset(rkey string) time.Time {
	if !ms.anyLearned.Load() {
		return time.Time{}
	}
	return ms.get(rkey).learned
}

// notBefore returns when a local turn may come at the earliest.
func (ms *memos) notBefore(rkey string) time.Time {
	m := ms.get(rkey)
	if b := m.bound(); b.After(m.hold) {
		return b
	}
	return m.hold
}

// notBeforeMoved is notBefore, and a channel closed when it may have
// moved earlier (the last ticket's turn did).
func (ms *memos) notBeforeMoved(rkey string) (time.Time, <-chan struct{}) {
	var nb time.Time
	var moved chan struct{}
	ms.set(rkey, func(m *memo) {
		nb = m.bound()
		if m.hold.After(nb) {
			nb = m.hold
		}
		if m.moved == nil {
			m.moved = make(chan struct{})
		}
		moved = m.moved
	})
	return nb, moved
}

// args returns the script's arguments for what this process knows: the
// state id, its last turn and its pause in µs from now ("" when none).
func (ms *memos) args(rkey string) (id any, last, hold string) {
	m := ms.get(rkey)
	if m.id == 0 {
		return "", "", ""
	}
	rel := func(t time.Time) string {
		if d := time.Until(t); d > 0 {
			return us(d)
		}
		return ""
	}
	return m.idArg, rel(m.bound()), rel(m.hold)
}

// localLimits is FailLocal's fallback for a Limiter with further
// limits: an in-process [throttle.Limiter] with this process's share of
// every limit, so that each of them holds while Redis is away, spent all
// or none as in Redis. Each bucket (the first limit's and the further
// ones) runs at its rate / Workers with its whole burst as capacity, but
// starts with only its share of it (Burst / Workers, rounded up), as
// localBuckets does; a window admits its share of Count (rounded up) per
// Per, so a cost above that share is refused with ErrCostExceedsBurst
// until Redis answers. Each further limit has a unit of its own there
// (its index), so that a share is spent on one bucket alone. Dropped
// when Redis answers again (reset), so that the next outage starts from
// the shares. Safe for concurrent use.
type localLimits struct {
	mu   sync.Mutex
	lim  *throttle.Limiter
	seen map[string]bool // keys whose shares were set
}

// reset drops the Limiter and its keys.
func (l *localLimits) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lim, l.seen = nil, nil
}

// localUnit is the unit of the further limit i in the fallback Limiter.
func localUnit(i int) string { return strconv.Itoa(i) }

// localCost returns c as the fallback Limiter counts it: N for the first
// limit, and each further limit's cost in its own unit.
func localCost(q *Limiter, c throttle.Cost) (throttle.Cost, error) {
	cost, err := q.costOf(c)
	if err != nil {
		return throttle.Cost{}, err
	}
	lc := throttle.Cost{N: c.N, Units: make(map[string]int, len(cost))}
	for i, v := range cost {
		if v > 0 {
			lc.Units[localUnit(i)] = int(v)
		}
	}
	return lc, nil
}

// key returns w's key in the fallback Limiter, its share set on first use.
func (l *localLimits) key(ctx context.Context, q *Limiter, w *keyWaiter) (throttle.Quota, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	workers := max(1, q.Workers)
	share := func(n int) int { return (n + workers - 1) / workers }
	x := q.xconfig()
	c := q.config()
	if l.lim == nil {
		lim := &throttle.Limiter{MaxKeys: maxLocalBuckets}
		if q.MaxQueued > 0 {
			lim.MaxQueued = share(q.MaxQueued) // the process's share of the key's queue
		}
		if c.limit != rate.Inf {
			lim.Limits = append(lim.Limits, throttle.Limit{Rate: c.limit / rate.Limit(workers), Burst: c.burst})
		}
		for i, u := range x.limits {
			s := u
			s.Unit = localUnit(i)
			if u.Per == 0 {
				s.Rate = u.Rate / rate.Limit(workers)
			} else {
				s.Count = share(u.Count)
			}
			lim.Limits = append(lim.Limits, s)
		}
		l.lim, l.seen = lim, make(map[string]bool)
	}
	fw := l.lim.For(w.key)
	if !l.seen[w.key] {
		if len(l.seen) >= maxLocalBuckets {
			clear(l.seen) // the keys the Limiter forgot come back full, as localBuckets'
		}
		l.seen[w.key] = true
		// Each bucket starts with its share: the rest of its burst spent.
		spend := throttle.Cost{Units: map[string]int{}}
		if c.limit != rate.Inf {
			spend.N = c.burst - share(c.burst)
		}
		for i, u := range x.limits {
			if u.Per == 0 {
				b := max(u.Burst, 1)
				if d := b - share(b); d > 0 {
					spend.Units[localUnit(i)] = d
				}
			}
		}
		if spend.N == 0 && len(spend.Units) > 0 {
			spend.N = 1 // a cost that names units spends a unit of the first limit
		}
		if spend.N > 0 || len(spend.Units) > 0 {
			if _, _, err := fw.Try(ctx, spend); err != nil {
				return nil, err
			}
		}
	}
	return fw, nil
}

// wait is waitLocal for a Limiter with further limits: c on w's key's
// shares, no turn before what this process knows of the key (memo), the
// local turn remembered.
func (l *localLimits) wait(ctx context.Context, q *Limiter, w *keyWaiter, c throttle.Cost) error {
	lc, err := localCost(q, c)
	if err != nil {
		return err
	}
	fw, err := l.key(ctx, q, w)
	if err != nil {
		return err
	}
	if err := sleepUntil(ctx, w.key, time.Now().Add(q.memo.notBefore(w.rkey).Sub(q.clock()))); err != nil {
		return err
	}
	if err := fw.Wait(ctx, lc); err != nil {
		return err
	}
	q.memo.local(w.rkey, q.clock())
	return nil
}

// try is tryFail's for a Limiter with further limits: c on w's key's
// shares now, or nothing and the wait that would take.
func (l *localLimits) try(ctx context.Context, q *Limiter, w *keyWaiter, c throttle.Cost) (bool, time.Duration, error) {
	lc, err := localCost(q, c)
	if err != nil {
		return false, 0, err
	}
	fw, err := l.key(ctx, q, w)
	if err != nil {
		return false, 0, err
	}
	return fw.Try(ctx, lc)
}

// reserve is reserveFail's for a Limiter with further limits: a turn for
// c on w's key's shares, no earlier than what this process knows of the
// key (memo).
func (l *localLimits) reserve(ctx context.Context, q *Limiter, w *keyWaiter, c throttle.Cost) (throttle.Reservation, error) {
	lc, err := localCost(q, c)
	if err != nil {
		return nil, err
	}
	fw, err := l.key(ctx, q, w)
	if err != nil {
		return nil, err
	}
	r, err := fw.Reserve(ctx, lc)
	if err != nil {
		return nil, err
	}
	nb := q.memo.notBefore(w.rkey)
	wake := time.Now().Add(max(r.Delay(), nb.Sub(q.clock())))
	if deadline, ok := ctx.Deadline(); ok && wake.After(deadline) {
		r.Cancel()
		return nil, &throttle.DeadlineError{Key: w.key, Delay: time.Until(wake)}
	}
	q.memo.local(w.rkey, q.clock().Add(time.Until(wake)))
	return &heldReservation{Reservation: r, notBefore: wake}, nil
}

// heldReservation is a fallback Limiter's reservation held no earlier
// than notBefore (a pause this process knows).
type heldReservation struct {
	throttle.Reservation
	notBefore time.Time
}

// Delay implements [throttle.Reservation].
func (h *heldReservation) Delay() time.Duration {
	return max(h.Reservation.Delay(), time.Until(h.notBefore))
}

// Wait implements [throttle.Reservation].
func (h *heldReservation) Wait(ctx context.Context) error {
	if err := sleepUntil(ctx, "", h.notBefore); err != nil {
		h.Cancel()
		return err
	}
	return h.Reservation.Wait(ctx)
}

// sleepUntil sleeps until t (at once if t has passed): a
// *throttle.DeadlineError for key if t is past ctx's deadline, ctx's
// error if it ends first.
func sleepUntil(ctx context.Context, key string, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return nil
	}
	if deadline, ok := ctx.Deadline(); ok && t.After(deadline) {
		return &throttle.DeadlineError{Key: key, Delay: d}
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
