package distributed

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttle-go/throttle"
)

// A key's calls for its leased turns (see lease.go): the leases, the
// turns asked again, and the tickets given back.

// serve makes the calls while waits are queued: asks the held turns
// again if they may have moved, leases for the waits queued (or, ahead,
// for those expected), and hands the tickets out; then clears
// b.calling. Tickets that came after every wait of the key ended (their
// contexts did) go back at once.
func (b *leaseBox) serve(ctx context.Context, ahead bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		if len(b.tickets) > 0 && b.stale() {
			b.refresh(ctx)
		}
		b.distribute(time.Now())
		if len(b.queue) == 0 && !ahead {
			break
		}
		b.aheadRun = ahead
		ahead = false
		b.lease(ctx)
		b.aheadRun = false
		b.distribute(time.Now())
	}
	b.calling = false
	// Tickets that came after every wait of the key ended (their
	// contexts did), or after Close gave the held ones back, go back now.
	if (b.active == 0 && b.ended || b.q.leases.done.Load()) && len(b.tickets)+len(b.back) > 0 {
		if id, back := b.takeBack(); len(back) > 0 {
			b.mu.Unlock()
			b.giveBack(ctx, id, back)
			b.mu.Lock()
		}
	}
}

// refresh asks the held tickets' turns again (op turns). b.mu is held,
// and released during the call.
func (b *leaseBox) refresh(ctx context.Context) {
	held := slices.Clone(b.tickets)
	id := b.id
	a := turnsArgs{ID: id, Tickets: make([]any, 0, 2*len(held))}
	for _, t := range held {
		a.Tickets = append(a.Tickets, queueFirst, t.end)
	}
	args := a.append(nil)
	b.mu.Unlock()
	gen, sub := b.q.pushes.mark()
	reply, err := b.w.run(context.WithoutCancel(ctx), "turns", args...)
	now := time.Now()
	b.mu.Lock()
	if err != nil || (len(reply) != len(held)+2 && len(reply) != len(held)+3) {
		return // Redis cannot say: the turns stay as they were
	}
	reply = reply[:len(held)+2] // a learned window's reset: see keyWaiter.sleep
	// Tickets may have been taken meanwhile (none added: a lease needs
	// the call, which this is); update the ones still held.
	waits := make(map[int64]int64, len(held))
	for i, t := range held {
		waits[t.end] = reply[i]
	}
	rnow := reply[len(reply)-1]
	kept := b.tickets[:0]
	for _, t := range b.tickets {
		wt, ok := waits[t.end]
		switch {
		case !ok || wt == -2: // the state is lost: so are they
			continue
		case wt == -1: // gone at its turn, as learned
			t.gone = true
		default:
			t.wake, t.rturn = now.Add(usDuration(wt)), rnow+wt
			t.exp = t.wake.Add(leaseKeep)
		}
		kept = append(kept, t)
	}
	b.tickets = kept
	if n := len(kept); n > 0 {
		// The last ticket held is this process's last: its turn as
		// learned now (see memos.ticket).
		t := kept[n-1]
		if t.gone {
			b.q.memo.ticket(b.rkey, t.id, queueFirst, t.end, now)
		} else {
			b.q.memo.ticket(b.rkey, t.id, queueFirst, t.end, t.wake)
		}
	}
	b.gen, b.sub = gen, sub
	b.recheck = recheckAt(now, reply[len(reply)-2])
}

func recheckAt(now time.Time, us int64) time.Time {
	if us < 0 {
		return time.Time{}
	}
	return now.Add(usDuration(us))
}

// lease gives back the tickets dropped unused (b.back) and takes tickets
// for the queued waits and those expected (op lease). b.mu is held, and
// released during the call; a store error goes
// to every queued wait (each applies the FailMode), and a refused turn
// (past every queued wait's deadline) to each as its DeadlineError.
func (b *leaseBox) lease(ctx context.Context) {
	now := time.Now()
	from := b.callFrom
	if from.IsZero() {
		from = now
	}
	b.callFrom = time.Time{}
	// need: the waits queued; with none (a lease ahead), minus the
	// tickets held, which the next waits take first.
	need := len(b.queue)
	if need == 0 {
		need = -len(b.tickets)
	}
	maxWait := ""
	var latest time.Duration
	for _, qw := range b.queue {
		if qw.deadline.IsZero() {
			maxWait = ""
			latest = -1
			break
		}
		latest = max(latest, time.Until(qw.deadline))
	}
	if latest >= 0 {
		maxWait = strconv.FormatInt(max(0, latest.Microseconds()), 10)
	}
	rate := b.rate(now)
	if b.due {
		// The last lease's turns all came due at once. Where the limit
		// also refills faster than the waits here come, the key has
		// room for more than they come at, and turns a burst leaves
		// unused go back at no cost (nothing is queued behind them): the
		// waits' pace in a burst sizes the lease (their rate, which the
		// quiet gaps between bursts bring down, would leave them short
		// of tickets). Where the limit binds, a leased turn left unused
		// is lost to the fleet, and the pace would hand one process the
		// next turns of all: the rate sizes the lease.
		if pace := b.pace(now); float64(b.q.config().limit) >= pace {
			rate = pace
		}
	}
	if now.Before(b.failed.Add(leaseRateWindow)) {
		rate = 0 // the store failed lately: only the waits queued
	}
	limit := b.q.maxLease()
	k := min(max(need, 1), limit)
	if spec := int(math.Ceil(rate * leaseHorizon.Seconds())); spec > 1 {
		k = min(max(need, 0)+spec, limit)
	}
	known, floor, hold := b.q.memo.args(b.rkey)
	a := leaseArgs{K: k, Need: need, Maxwait: maxWait, Rate: strconv.FormatFloat(rate, 'g', 6, 64), Late: leaseLate.Microseconds(), KnownID: known, KnownFloor: floor, KnownHold: hold}
	// Given back once: a call that failed may have taken them.
	args := a.back(b.id, b.back).append(nil)
	b.back = nil
	first := len(b.tickets) == 0
	b.mu.Unlock()
	gen, sub := b.q.pushes.mark()
	reply, err := b.w.run(context.WithoutCancel(ctx), "lease", args...)
	recv := time.Now()
	b.mu.Lock()
	if err == nil && len(reply) > rleaseWaits && len(reply) == rleaseWaits+max(int(reply[rleaseCount]), 1)+1 {
		// A learned budget's window's reset (see keyWaiter.Observe).
		b.q.memo.learn(b.rkey, recv.Add(usDuration(reply[len(reply)-1])))
		reply = reply[:len(reply)-1]
	} else if err == nil && len(reply) > rleaseWaits {
		b.q.memo.learn(b.rkey, time.Time{})
	}
	if err == nil && (len(reply) <= rleaseWaits || len(reply) != rleaseWaits+max(int(reply[rleaseCount]), 1)) {
		err = fmt.Errorf("unexpected reply %v from the schedule script", reply)
	}
	if err != nil {
		b.failed = recv
		for _, qw := range b.queue {
			qw.ch <- leaseGrant{err: err}
		}
		b.queue = nil
		return
	}
	b.called(from, recv)
	count, id, last, rnow := reply[rleaseCount], reply[rleaseID], reply[rleaseLast], reply[rleaseNow]
	b.stats.leases++
	b.stats.leased += int(count)
	if need <= 0 {
		b.stats.ahead++
		if len(b.queue) > 0 {
			b.stats.late++
		}
	}
	if count == 0 && need <= 0 {
		return // ahead: none expected in time; the queued waits call
	}
	if count == 0 {
		d := usDuration(reply[rleaseWaits])
		for _, qw := range b.queue {
			qw.ch <- leaseGrant{err: &throttle.DeadlineError{Key: b.w.key, Delay: d}}
		}
		b.queue = nil
		return
	}
	if id != b.id {
		b.tickets = nil // of a state Redis lost
		first = true
	}
	b.id = id
	if first || len(b.tickets) == 0 {
		b.gen, b.sub = gen, sub
	}
	b.recheck = recheckAt(recv, reply[rleaseRecheck])
	var wake time.Time
	b.tickets = slices.Grow(b.tickets, int(count)) // one allocation, not a growing series
	for j := range count {
		wt := reply[rleaseWaits+j]
		t := leased{id: id, end: last - count + 1 + j, rturn: rnow + wt, gone: wt == 0}
		t.wake = recv.Add(usDuration(wt))
		t.exp = t.wake.Add(leaseKeep)
		wake = t.wake
		b.tickets = append(b.tickets, t)
	}
	b.due = reply[rleaseWaits+count-1] == 0
	b.q.memo.ticket(b.rkey, id, queueFirst, last, wake)
	if b.sl == nil {
		b.sl = b.q.pushes.add(b.q, b.rkey)
	}
	b.armIdle()
}

// back returns a with the tickets ends of the state id given back
// (none: BackID "").
func (a leaseArgs) back(id int64, back []int64) leaseArgs {
	if len(back) == 0 {
		a.BackID, a.Back = "", nil
		return a
	}
	a.BackID, a.Back = id, make([]any, len(back))
	for i, e := range back {
		a.Back[i] = e
	}
	return a
}

// giveBackArgs are the arguments of a lease that takes nothing (k = 0)
// and gives back the tickets ends of the state id.
func giveBackArgs(id int64, back []int64) leaseArgs {
	a := leaseArgs{K: 0, Need: 0, Maxwait: "", Rate: "0", Late: 0, KnownID: "", KnownFloor: "", KnownHold: ""}
	return a.back(id, back)
}

// takeBack removes the held tickets and the ones dropped unused, and
// returns their state's id and ends (the script makes a hole of a turn
// not yet due and settles a spent one: see op lease), and stops
// listening and the idle timer. b.mu is held.
func (b *leaseBox) takeBack() (int64, []int64) {
	back := b.back
	b.back = nil
	for _, t := range b.tickets {
		if t.id == b.id {
			back = append(back, t.end)
		}
	}
	b.tickets = nil
	if b.sl != nil {
		b.q.pushes.remove(b.sl)
		b.sl = nil
	}
	if b.idle != nil {
		b.idle.Stop()
		b.idle, b.idleTok = nil, nil
	}
	return b.id, back
}

// giveBack returns the tickets ends of the state id (op lease, k = 0).
func (b *leaseBox) giveBack(ctx context.Context, id int64, back []int64) {
	_, _ = b.w.run(context.WithoutCancel(ctx), "lease", giveBackArgs(id, back).append(nil)...)
}

// armIdle starts the idle timer if it is not running. b.mu is held.
func (b *leaseBox) armIdle() {
	if b.idle != nil {
		return
	}
	b.setIdle(leaseIdle)
}

// setIdle starts a new idle timer in d. b.mu is held.
func (b *leaseBox) setIdle(d time.Duration) {
	tok := new(int)
	b.idleTok = tok
	b.idle = time.AfterFunc(d, func() { b.idleFired(tok) })
}

// idleFired gives the unused turns back if no wait came for leaseIdle,
// and otherwise looks again leaseIdle after the last one.
func (b *leaseBox) idleFired(tok *int) {
	l := &b.q.leases
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return // Close gives them back
	}
	b.mu.Lock()
	if b.idleTok != tok {
		b.mu.Unlock()
		l.mu.Unlock()
		return // stopped, or another timer since
	}
	now := time.Now()
	if left := leaseIdle - now.Sub(b.last); b.active > 0 || left > 0 && len(b.tickets)+len(b.back) > 0 {
		// Not idle: waits of the key are in progress here (sleeping on
		// their turns, they come back for the tickets held), or came
		// within leaseIdle.
		b.setIdle(max(left, leaseIdle/2))
		b.mu.Unlock()
		l.mu.Unlock()
		return
	}
	id, back := b.takeBack()
	b.mu.Unlock()
	if len(back) > 0 {
		b.q.refunds.Add(1) // under l.mu: before Close's Wait, or not at all
	}
	l.mu.Unlock()
	if len(back) > 0 {
		defer b.q.refunds.Done()
		b.giveBack(context.Background(), id, back)
	}
	l.forget(b)
}

// close gives every key's unused turns back and stops the timers; later
// waits call without leases.
func (l *leases) close() {
	l.mu.Lock()
	l.closed = true
	l.done.Store(true)
	boxes := make([]*leaseBox, 0, len(l.m))
	for _, b := range l.m {
		boxes = append(boxes, b)
	}
	l.mu.Unlock()
	var wg sync.WaitGroup
	for _, b := range boxes {
		b.mu.Lock()
		id, back := b.takeBack()
		b.mu.Unlock()
		if len(back) > 0 {
			wg.Go(func() { b.giveBack(context.Background(), id, back) })
		}
	}
	wg.Wait()
}

// giveBackLease returns the tickets a late lease call took (see
// Limiter.giveBack): its args are those of leaseBox.lease, its reply
// {count, id, last end, …}.
func giveBackLease(ctx context.Context, q *Limiter, keys []string, args []any, cmd *redis.Cmd) {
	v, ok := scriptInts(cmd.Val())
	if !ok || len(v) <= rleaseNow || v[rleaseCount] <= 0 {
		return
	}
	count, id, last := v[rleaseCount], v[rleaseID], v[rleaseLast]
	back := make([]int64, 0, count)
	for e := last - count + 1; e <= last; e++ {
		back = append(back, e)
	}
	h := headerArgs{Op: "lease", Interval: args[argInterval], Burst: args[argBurst], Channel: args[argChannel]}
	_ = scheduleScript.Run(ctx, q.client, keys, giveBackArgs(id, back).append(h.append(nil))...).Err()
}
