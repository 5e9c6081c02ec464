package distributed

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/throttle-go/throttle"
)

// Leased turns: a process whose waits on a key overlap takes several
// turns in one script call (op lease: k tickets of one unit, taken as k
// waits in a row would take them) and hands them to its waits of one
// unit in order. The tickets are the schedule's own, so every rule holds
// for them unchanged (never over, FIFO in the key's queue, exact refunds,
// pauses, windows, cuts); what changes is who holds them: a process's
// FIFO (leaseBox) until a wait takes one and sleeps to its turn as any
// wait does.
//
// How many: the waits queued in the process (need), and, while they come
// often, the ones expected within leaseHorizon at their recent rate (at
// their pace in a burst while the key's turns come due at once and its
// limit refills faster than that); the
// script takes one of the latter only if its turn comes no earlier than
// that wait is expected (less leaseLate), so that the remaining quota
// (the key's queue, a window, a pause) bounds the lease. A wait that
// finds no other of its key in progress in the process, and no leased
// turn, calls as it always did (op wait): k = 1 at low rates, where waits
// do not overlap.
//
// What comes back: a turn unused leaseKeep after it came is no longer
// handed out (sending later would bunch the units); it is given back in
// the key's next lease call, before the new tickets are taken. The
// script settles a spent turn given back to no cost (settle's rule: the
// bucket's unit back, to its burst and no further) while nothing is
// queued and no pause holds, so that no turn moves; otherwise it stays
// spent. Turns not yet due go back as holes (the cancel op's rule), the
// held ones with the spent ones, when no wait of the key was in progress
// for leaseIdle (a timer per key, not a goroutine), when the last wait of
// the key in the process ends by its context, and at Close
// (lease_calls.go). A process that dies leaves its tickets to go at their
// turns: capacity lost, never more than MaxLease per process.
const (
	// defaultMaxLease is the most turns one call leases when
	// Limiter.MaxLease is zero.
	defaultMaxLease = 256
	// leaseHorizon: the waits expected within it, at their recent rate,
	// are leased for.
	leaseHorizon = 50 * time.Millisecond
	// leaseLate: the script leases a ticket for a wait expected only if
	// its turn comes no earlier than that wait is expected, less this:
	// well before leaseKeep, so that a lease of turns due at once brings
	// enough of them for the next lease, made ahead, to come before they
	// run out.
	leaseLate = 10 * time.Millisecond
	// leaseKeep: a leased turn unused this long after it came is handed
	// out no more, but given back. Well past leaseLate, so that a wait
	// later than expected (the local rate is an estimate, a busy machine
	// holds a process) still finds it.
	leaseKeep = 30 * time.Millisecond
	// leaseIdle: no wait of the key in progress for this long gives the
	// unused turns back.
	leaseIdle = 100 * time.Millisecond
	// leaseAhead: the next lease is made ahead when the tickets held
	// last less than this at the local pace, or than four times a lease's
	// recent time (leaseBox.callTime: a busy machine's round trip and
	// the serving goroutine's start take longer); see lowWater.
	leaseAhead = 500 * time.Microsecond
	// leaseRateWindow is the window of the local rate's count, and
	// leaseRateMin the fewest waits in it that make a rate: a few waits
	// at once are none. The rate of leaseBurstWindow, when higher, is
	// the pace the tickets held go at (it times the next lease; the
	// leases are sized by the rate).
	leaseRateWindow  = 100 * time.Millisecond
	leaseBurstWindow = 10 * time.Millisecond
	leaseRateMin     = 8
	// maxLeaseKeys bounds the keys a Limiter leases for at once; beyond
	// it, a key's waits call as without leases.
	maxLeaseKeys = 4096
)

// leases are a Limiter's leaseBoxes, by Redis key. Safe for concurrent use.
type leases struct {
	mu     sync.Mutex // protects the fields below
	m      map[string]*leaseBox
	closed bool // Close was called: no more leases, no timers

	done atomic.Bool // closed, readable under a box's mu
}

// leased is one leased ticket (queue first, one unit) not yet taken.
type leased struct {
	id    int64 // the state it came from
	end   int64
	wake  time.Time // its turn on this process's clock
	exp   time.Time // handed out until then: leaseKeep past its turn
	rturn int64     // its turn on Redis's clock, µs
	gone  bool      // its turn had come at the lease: it went in Redis then
}

// leaseWait is a wait queued in the process for a leased turn.
type leaseWait struct {
	deadline time.Time       // zero: none
	ch       chan leaseGrant // capacity 1: the outcome
}

// leaseGrant is what a queued wait is handed: a ticket, or an error (the
// store's, for its FailMode, or a *throttle.DeadlineError).
type leaseGrant struct {
	t   leased
	err error
}

// leaseBox is one key's leased turns in this process.
type leaseBox struct {
	q    *Limiter
	w    *keyWaiter // makes the calls (any waiter of the key will do)
	rkey string

	mu      sync.Mutex // protects the fields below
	tickets []leased   // by end: the key's queue order
	id      int64      // the state the tickets came from
	back    []int64    // ends of tickets of id dropped unused, for the next lease call
	// gen, sub: pushes.mark before the oldest turn in tickets was
	// learned; a push since (or no subscription then) may have moved
	// them: they are asked again before one is handed out.
	gen      uint64
	sub      subState
	recheck  time.Time    // a cut's step: turns move then (zero: none)
	queue    []*leaseWait // waits queued for a turn, in arrival order
	calling  bool         // a serve runs: the key's calls (see leases.serve)
	active   int          // waits of the key in progress here, leased or not
	last     time.Time    // the last wait's arrival
	overlap  time.Time    // the last arrival while another wait was in progress
	failed   time.Time    // the last lease the store failed
	ended    bool         // the last wait ended by its context, none came since
	rates    [2]winRate   // arrivals: in leaseRateWindow, in leaseBurstWindow
	rateBase time.Time
	callFrom time.Time     // when the running serve's lease was needed (zero: as it was sent)
	callTime time.Duration // a lease's recent time, from its need to its tickets (a moving average)
	idle     *time.Timer   // gives the unused turns back; nil: none
	idleTok  *int          // identifies idle's run (a stopped timer may still run)
	sl       *sleeper      // listening for pushes while tickets are held
	aheadRun bool          // the running serve's lease is one made ahead
	due      bool          // the last lease's turns were all due as it came
	stats    leaseStats
}

// leaseStats counts what a key's waits met in this process, for the
// tests and benchmarks (deterministic proxies of the leases' cost: a
// stall is a wait held for a call; a late lease made ahead left waits
// stalled; an expired ticket is a turn that went unused).
type leaseStats struct {
	waits     int           // waits through the box (not the direct ones)
	direct    int           // waits alone: op wait
	stalled   int           // waits that found no ticket to take (none, or their turns to ask again) and waited for a call
	cold      int           // of them, the ones that started the call
	onAhead   int           // of them, the ones that waited for a lease made ahead
	stallTime time.Duration // the stalled waits' time until their grant
	leases    int           // lease calls answered
	ahead     int           // of them, made ahead
	late      int           // of those, the ones whose reply found waits queued
	leased    int           // tickets leased
	expired   int           // tickets dropped unused, leaseKeep past their turn, then given back
}

// maxLease returns the most turns one call leases; 1: no leases.
func (q *Limiter) maxLease() int {
	if q.MaxQueued > 0 {
		return 1 // a leased turn is queued in the process, past the bound's count
	}
	if q.classes.Load() {
		return 1 // a wait of another class may pass a leased turn unasked
	}
	if q.MaxLease == 0 {
		return defaultMaxLease
	}
	return max(q.MaxLease, 1)
}

// box returns rkey's leaseBox, nil if the Limiter leases no more.
func (l *leases) box(w *keyWaiter) *leaseBox {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	if b, ok := l.m[w.rkey]; ok {
		return b
	}
	if len(l.m) >= maxLeaseKeys {
		for k, b := range l.m {
			if b.unused() {
				delete(l.m, k)
			}
		}
		if len(l.m) >= maxLeaseKeys {
			return nil
		}
	}
	if l.m == nil {
		l.m = make(map[string]*leaseBox)
	}
	b := &leaseBox{q: w.q, w: w, rkey: w.rkey, rateBase: time.Now()}
	l.m[w.rkey] = b
	return b
}

// unused reports whether b holds nothing and no wait is in progress, so
// that forgetting it loses nothing but the local rate. The caller holds
// the leases' mu.
func (b *leaseBox) unused() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.active == 0 && len(b.tickets) == 0 && len(b.back) == 0 && len(b.queue) == 0 && !b.calling && b.idle == nil
}

// forget drops b if it is unused.
func (l *leases) forget(b *leaseBox) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m[b.rkey] == b && b.unused() {
		delete(l.m, b.rkey)
	}
}

// wait is a wait of one unit in the queue of first attempts through the
// key's leased turns; it returns the turn in µs of Redis's clock.
func (l *leases) wait(ctx context.Context, w *keyWaiter) (int64, error) {
	b := l.box(w)
	if b == nil {
		return w.waitDirect(ctx, 1, queueFirst)
	}
	now := time.Now()
	b.mu.Lock()
	others := b.active
	b.active++
	b.arrive(now)
	if others > 0 {
		b.overlap = now
	}
	if others == 0 && len(b.tickets) == 0 && !b.calling && now.Sub(b.overlap) > leaseIdle {
		// Alone, and no wait overlapped another lately: one call, as
		// without leases.
		b.stats.direct++
		b.mu.Unlock()
		turn, err := w.waitDirect(ctx, 1, queueFirst)
		b.leave(ctx, err)
		return turn, err
	}
	b.stats.waits++
	var (
		g      leaseGrant
		served bool
	)
	if len(b.queue) == 0 && len(b.tickets) > 0 && !b.stale() {
		g, served = b.next(w.key, deadlineOf(ctx), now)
	}
	if served {
		ahead := b.lowWater(now)
		if ahead {
			b.calling, b.callFrom = true, now // the next lease, made ahead
		}
		b.mu.Unlock()
		if ahead {
			l.serve(ctx, b, true)
		}
	} else {
		me := &leaseWait{deadline: deadlineOf(ctx), ch: make(chan leaseGrant, 1)}
		b.queue = append(b.queue, me)
		b.stats.stalled++
		start := !b.calling
		if start {
			b.calling, b.callFrom = true, now
			b.stats.cold++
		} else if b.aheadRun {
			b.stats.onAhead++
		}
		b.mu.Unlock()
		if start {
			l.serve(ctx, b, false)
		}
		g = b.await(ctx, me)
		b.mu.Lock()
		b.stats.stallTime += time.Since(now)
		b.mu.Unlock()
	}
	turn, err := b.use(ctx, w, g)
	b.leave(ctx, err)
	return turn, err
}

// lowWater reports whether the tickets left run out within about a
// call's time at the local rate, so that the next lease is made ahead,
// before a wait has to wait for it. b.mu is held.
func (b *leaseBox) lowWater(now time.Time) bool {
	r := b.rate(now)
	if b.calling || r*leaseHorizon.Seconds() <= 1 {
		return false
	}
	// The tickets that go within about four times a lease's time at the
	// waits' pace (in a burst, faster than the rate leases are sized by),
	// and no more than a lease of turns due at once leaves room for: it
	// brings r·leaseLate less the tickets held.
	low := min(b.pace(now)*max(leaseAhead, 4*b.callTime).Seconds(), r*(leaseLate/2).Seconds())
	return float64(len(b.tickets)) < max(2, low)
}

// called notes that a lease needed at from brought its tickets at recv.
// b.mu is held.
func (b *leaseBox) called(from, recv time.Time) {
	d := recv.Sub(from)
	if b.callTime == 0 {
		b.callTime = d
		return
	}
	b.callTime += (d - b.callTime) / 4
}

// serve makes the key's calls (b.calling is set) in a goroutine of its
// own, counted for Close (which waits for it), so that no wait is held
// by a call made for others: each waits for its grant or its context.
// After Close (no more goroutines), the calling wait makes them itself.
func (l *leases) serve(ctx context.Context, b *leaseBox, ahead bool) {
	ctx = context.WithoutCancel(ctx) // a call for several waits: bounded by Timeout
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		b.serve(ctx, ahead)
		return
	}
	b.q.refunds.Add(1) // under l.mu: before Close's Wait, or not at all
	l.mu.Unlock()
	go func() {
		defer b.q.refunds.Done()
		b.serve(ctx, ahead)
	}()
}

func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// await waits for a queued wait's grant, or for its context: then a
// ticket it was handed goes back to the others.
func (b *leaseBox) await(ctx context.Context, me *leaseWait) leaseGrant {
	select {
	case g := <-me.ch:
		if ctx.Err() == nil {
			return g
		}
		b.mu.Lock()
		if g.err == nil {
			b.putBack(g.t)
		}
		b.mu.Unlock()
	case <-ctx.Done():
		b.mu.Lock()
		if i := slices.Index(b.queue, me); i >= 0 {
			b.queue = slices.Delete(b.queue, i, i+1)
		}
		// Nothing is sent to me once I am out of the queue (sends are
		// made under mu): what was sent is in the channel.
		if len(me.ch) > 0 {
			if g := <-me.ch; g.err == nil {
				b.putBack(g.t)
			}
		}
		b.mu.Unlock()
	}
	return leaseGrant{err: ctx.Err()}
}

// use sleeps on a granted ticket until its turn.
func (b *leaseBox) use(ctx context.Context, w *keyWaiter, g leaseGrant) (int64, error) {
	if g.err != nil {
		if errCaller(ctx, g.err) || isDeadline(g.err) {
			return 0, g.err
		}
		return 0, w.fail(ctx, throttle.Cost{N: 1}, g.err)
	}
	t := g.t
	if t.gone {
		return t.rturn, nil
	}
	b.mu.Lock()
	gen, sub, recheck := b.gen, b.sub, time.Duration(-1)
	if !b.recheck.IsZero() {
		recheck = max(time.Until(b.recheck), 0)
	}
	b.mu.Unlock()
	wait := time.Until(t.wake)
	return w.sleep(ctx, ticket{id: t.id, qi: queueFirst, n: 1, end: t.end}, wait, recheck, t.rturn-wait.Microseconds(), gen, sub, false)
}

func isDeadline(err error) bool {
	_, ok := err.(*throttle.DeadlineError)
	return ok
}

// leave ends a wait of the key: the last one to end by its context gives
// the unused turns back.
func (b *leaseBox) leave(ctx context.Context, err error) {
	b.mu.Lock()
	b.active--
	var (
		id   int64
		back []int64
	)
	if b.active == 0 && err != nil && ctx.Err() != nil {
		b.ended = true
		id, back = b.takeBack()
	}
	b.mu.Unlock()
	if len(back) > 0 {
		b.q.refunds.Go(func() { b.giveBack(ctx, id, back) })
	}
}

// arrive counts a wait's arrival at now for the local rate. b.mu is held.
func (b *leaseBox) arrive(now time.Time) {
	b.last, b.ended = now, false
	el := now.Sub(b.rateBase)
	b.rates[0].arrive(el, leaseRateWindow)
	b.rates[1].arrive(el, leaseBurstWindow)
}

// rate returns the local waits a second, over the last leaseRateWindow
// or so: the rate leases are sized by. b.mu is held.
func (b *leaseBox) rate(now time.Time) float64 {
	return b.rates[0].rate(now.Sub(b.rateBase), leaseRateWindow)
}

// pace returns the local waits a second over the last leaseBurstWindow
// or so, if higher than rate: how fast the tickets held go while waits
// come in bursts (see lowWater). b.mu is held.
func (b *leaseBox) pace(now time.Time) float64 {
	el := now.Sub(b.rateBase)
	return max(b.rates[0].rate(el, leaseRateWindow), b.rates[1].rate(el, leaseBurstWindow))
}

// winRate counts arrivals in consecutive windows of one length.
type winRate struct {
	at        time.Duration // the window cur counts, since the box's rateBase
	cur, prev float64       // arrivals in it, and in the one before
}

// arrive counts an arrival el after the box's rateBase, in windows of win.
func (c *winRate) arrive(el, win time.Duration) {
	i := el / win
	switch i {
	case c.at:
	case c.at + 1:
		c.prev, c.cur = c.cur, 0
	default:
		c.prev, c.cur = 0, 0
	}
	c.at = i
	c.cur++
}

// rate returns the arrivals a second, el after the box's rateBase, over
// the last window of win or so; 0 for fewer than leaseRateMin.
func (c *winRate) rate(el, win time.Duration) float64 {
	cur, prev := c.cur, c.prev
	switch el / win {
	case c.at:
	case c.at + 1:
		cur, prev = 0, cur
	default:
		return 0
	}
	frac := float64(el%win) / float64(win)
	if n := cur + prev*(1-frac); n >= leaseRateMin {
		return n / win.Seconds()
	}
	return 0 // a few waits at once are no rate
}

// stale reports whether the tickets' turns may have moved since they were
// learned. b.mu is held.
func (b *leaseBox) stale() bool {
	if !b.recheck.IsZero() && !time.Now().Before(b.recheck) {
		return true
	}
	return !b.q.pushes.unchanged(b.gen, b.sub)
}

// next hands the next ticket to a wait of key whose deadline is deadline
// (zero: none), at now: the turns leaseKeep past are dropped, to be
// given back in the next lease call; a turn past the deadline is refused
// and stays for the next wait. It reports false if no ticket is left.
// b.mu is held.
func (b *leaseBox) next(key string, deadline, now time.Time) (leaseGrant, bool) {
	i := 0
	for i < len(b.tickets) && b.tickets[i].exp.Before(now) {
		if t := b.tickets[i]; t.id == b.id {
			b.back = append(b.back, t.end)
		}
		i++
	}
	b.stats.expired += i
	b.tickets = b.tickets[i:]
	if len(b.tickets) == 0 {
		b.tickets = nil
		return leaseGrant{}, false
	}
	t := b.tickets[0]
	if d := t.wake.Sub(now); !deadline.IsZero() && d > 0 && !t.wake.Before(deadline) {
		return leaseGrant{err: &throttle.DeadlineError{Key: key, Delay: d}}, true
	}
	b.tickets = b.tickets[1:]
	return leaseGrant{t: t}, true
}

// distribute hands tickets to the queued waits, in order. b.mu is held.
func (b *leaseBox) distribute(now time.Time) {
	for len(b.queue) > 0 {
		g, ok := b.next(b.w.key, b.queue[0].deadline, now)
		if !ok {
			return
		}
		b.queue[0].ch <- g
		b.queue = b.queue[1:]
	}
}

// putBack returns a ticket a wait was handed but did not take. b.mu is held.
func (b *leaseBox) putBack(t leased) {
	if t.id != b.id {
		return // of a state Redis lost since
	}
	i, _ := slices.BinarySearchFunc(b.tickets, t.end, func(x leased, e int64) int { return int(x.end - e) })
	b.tickets = slices.Insert(b.tickets, i, t)
}
