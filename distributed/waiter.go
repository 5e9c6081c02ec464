package distributed

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/throttle-go/throttle"
)

// keyWaiter is one key of a Limiter, as For returns it: the key's
// [throttle.Quota], kept in Redis. Its fields are set by For and
// read-only afterwards.
type keyWaiter struct {
	q    *Limiter
	key  string   // the user's key, for errors
	rkey string   // the Redis key (see redisKey)
	keys []string // {rkey}, the script's KEYS
	// channel is where the script announces moves of the key's queued
	// turns (see pushChannel).
	channel string
	// lkeys are the in-flight script's KEYS (see inflightKeys); nil
	// without a cap.
	lkeys []string
}

func newKeyWaiter(q *Limiter, key string) *keyWaiter {
	rkey := redisKey(q.Prefix, q.name, key)
	q.waiterSeed() // makes q.channel
	w := &keyWaiter{q: q, key: key, rkey: rkey, keys: []string{rkey}, channel: q.channel}
	if q.InFlight > 0 {
		w.lkeys = inflightKeys(rkey)
	}
	return w
}

// run calls the schedule script's op with its own arguments, and the
// configuration in force (see Limiter.Version: a newer one is adopted and
// the call made again, once).
func (w *keyWaiter) run(ctx context.Context, op string, args ...any) ([]int64, error) {
	c := w.q.config()
	reply, err := w.runOnce(ctx, c, op, args)
	if err == nil {
		return reply, nil
	}
	retry, cerr, ok := w.configCheck(ctx, c, err)
	switch {
	case !ok:
		return nil, err
	case !retry:
		return nil, cerr
	}
	c = w.q.config()
	reply, err = w.runOnce(ctx, c, op, args)
	if err != nil {
		if _, cerr, ok := w.configCheck(ctx, c, err); ok {
			// Replaced again meanwhile: the next call follows.
			return nil, cmp.Or(cerr, err)
		}
	}
	return reply, err
}

func (w *keyWaiter) runOnce(ctx context.Context, c *qconf, op string, args []any) ([]int64, error) {
	if c.err != nil {
		return nil, c.err
	}
	// The script's fixed arguments are converted and boxed once (qconf):
	// a call allocates only what the round trip needs.
	h := headerArgs{Op: op, Interval: c.interval, Burst: c.burstArg, Channel: w.channel}
	all := append(h.append(make([]any, 0, headerLen+len(args))), args...)
	cmd, err := w.q.call(ctx, w.key, scheduleScript, w.keys, all...)
	if err != nil {
		return nil, err
	}
	out, ok := scriptInts(cmd.Val())
	if !ok {
		return nil, fmt.Errorf("unexpected reply %v from the schedule script", cmd.Val())
	}
	return out, nil
}

// farUs bounds the µs of a reply (see FAR in schedule.lua): 2^62 µs is
// past the largest time.Duration, so a wait that long reads as the
// largest Duration (see usDuration), and Redis's clock in µs plus it
// still fits an int64.
const farUs = 1 << 62

// usDuration converts µs of a reply to a Duration, saturated: a turn
// past the largest Duration (292 years) is never, within any deadline
// (a wait with one is refused at once, one without sleeps until its
// context ends), as for the in-process Limiter; never a time that
// overflowed into the past.
func usDuration(us int64) time.Duration {
	switch {
	case us >= math.MaxInt64/int64(time.Microsecond):
		return math.MaxInt64
	case us <= math.MinInt64/int64(time.Microsecond):
		return math.MinInt64
	}
	return time.Duration(us) * time.Microsecond
}

// scriptInts reads a reply of the schedule script as its numbers: an
// integer, an array of integers, or (the fast paths' form; see
// packReply in schedule.lua) a string of doubles packed little-endian,
// truncated toward zero as Redis truncates a Lua number it replies and
// saturated at ±farUs, as the script caps the numbers it replies.
func scriptInts(v any) ([]int64, bool) {
	switch v := v.(type) {
	case int64:
		return []int64{v}, true
	case string:
		if len(v)%8 != 0 {
			return nil, false
		}
		out := make([]int64, len(v)/8)
		for i := range out {
			f := math.Float64frombits(binary.LittleEndian.Uint64([]byte(v[8*i : 8*i+8])))
			if math.IsNaN(f) {
				return nil, false
			}
			out[i] = int64(min(max(f, -farUs), farUs))
		}
		return out, true
	case []any:
		out := make([]int64, len(v))
		for i, x := range v {
			n, ok := x.(int64)
			if !ok {
				return nil, false
			}
			out[i] = n
		}
		return out, true
	}
	return nil, false
}

// ticket is a wait's place in the key's queue: end in queue qi of the
// state id, n units.
type ticket struct {
	id    int64
	qi, n int
	end   int64
}

// cancelArgs are the arguments of the op that gives t's units back.
func (t ticket) cancelArgs() cancelArgs {
	return cancelArgs{ID: t.id, Queue: t.qi, End: t.end, N: t.n}
}

// WaitN waits for n units of the key's first limit: Wait of Cost{N: n}.
func (w *keyWaiter) WaitN(ctx context.Context, n int) error {
	_, err := w.wait(ctx, throttle.Cost{N: n})
	return err
}

// Wait waits for cost: see [throttle.Quota]. It keeps that contract for
// the whole fleet:
//
//   - A cost that no wait can serve fails before any Redis call: a
//     negative cost, a unit with no limit, or an invalid limit with
//     [throttle.ErrInvalidLimit]; more than a limit holds at once with
//     [throttle.ErrCostExceedsBurst]. A cost of no unit of the first
//     limit (N 0) returns nil at once and spends nothing, whatever units
//     of the further limits it names, as a [throttle.Limiter]'s key.
//   - One script call gives the wait its ticket in the key's queue and
//     returns the wait until its turn (or, for waits of one unit that
//     overlap in the process, a turn this process leased: see "Leased
//     turns" in the package doc). If the turn is past ctx's deadline,
//     Wait returns a [*throttle.DeadlineError] (matching
//     [throttle.ErrWouldExceedDeadline] and [context.DeadlineExceeded])
//     at once, and nothing was kept. (If the round trip itself used up
//     the last of the margin, the ticket is given back as below and the
//     same error returned.)
//   - While it sleeps, a move of the key's queue (a pause, a cut, a
//     window, a refund ahead of it) costs its process one more call, for
//     all its waits of the key sleeping then, to learn the new turns (see
//     "Pauses and other moves of the queue" in the package doc); a moved
//     turn past ctx's deadline gives the units back and returns a
//     [*throttle.DeadlineError] at once.
//   - If ctx ends while Wait sleeps, Wait returns ctx.Err() at once and a
//     second script call, in the background, gives the units back: the
//     tickets behind move up, so the units go to the next wait in line,
//     never to two. The refund is best effort: if Redis fails it, the
//     units are lost, which errs on the side of the API's limit.
//     Likewise, if ctx ends (or Timeout passes) while the reserving call
//     itself is in flight: an inline call (see [Limiter]) is not cut by
//     ctx, Wait returns when Redis answers (within Timeout) and gives a
//     ticket the call took back; a call in a goroutine of its own
//     (Cluster, Ring) returns at once and is left to finish in the
//     background (up to 3s), and a ticket it took is given back then. A
//     ticket whose turn had already come is spent, and so is one of a
//     call cut at Timeout.
//   - If Redis cannot answer, FailMode decides (see [FailMode]).
func (w *keyWaiter) Wait(ctx context.Context, cost ...throttle.Cost) error {
	_, err := w.wait(ctx, sum(cost))
	return err
}

// waitN is WaitN that also returns the turn it went at, in µs of Redis's
// clock; 0 when no turn came from Redis (n = 0, a fail mode).
func (w *keyWaiter) waitN(ctx context.Context, n int) (turn int64, err error) {
	return w.wait(ctx, throttle.Cost{N: n})
}

// wait waits for c and returns the turn it went at (see waitN).
func (w *keyWaiter) wait(ctx context.Context, c throttle.Cost) (int64, error) {
	q := w.q
	n, qi := c.N, q.queueOf(ctx, c)
	if err := q.check(n); err != nil {
		return 0, err
	}
	cost, err := q.costOf(c)
	if err != nil {
		return 0, err
	}
	if n == 0 {
		// No unit of the first limit: nothing to queue (the engine's
		// queues hold tickets of the first limit's units); a cost that
		// names further limits' units is refused, as a throttle.Limiter's
		// key refuses it.
		if anyUnits(c) {
			return 0, fmt.Errorf("%w: a cost of no unit of the first limit (N 0) names units %v: a wait is at least one unit of its first limit", throttle.ErrInvalidLimit, c.Units)
		}
		return 0, nil
	}
	x := q.xargs(cost)
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if n == 1 && qi == queueFirst && x == nil && q.maxLease() > 1 {
		return q.leases.wait(ctx, w) // see lease.go
	}
	return w.waitDirectX(ctx, c, x)
}

// waitDirect is a wait of n units of a Limiter without further limits
// in queue qi, with one call of its own (op wait), checks done.
func (w *keyWaiter) waitDirect(ctx context.Context, n, qi int) (int64, error) {
	c := throttle.Cost{N: n, Retry: qi == queueRetry}
	return w.waitDirectX(ctx, c, nil)
}

// waitDirectX is waitDirect for c, with its cost in the Limiter's
// further limits (x: xargs; nil: none), checks done.
func (w *keyWaiter) waitDirectX(ctx context.Context, c throttle.Cost, x []any) (int64, error) {
	r, err := w.takeX(ctx, c.N, w.q.queueOf(ctx, c), x)
	if err != nil {
		if errCaller(ctx, err) || r.refused {
			return 0, err
		}
		return 0, w.fail(ctx, c, err)
	}
	if r.wait <= 0 {
		return r.rnow, nil
	}
	// A first attempt's ticket may be passed by a retry or another
	// class's ticket taken just before its turn, whose push could reach
	// this process after the turn: it asks before going (confirm). Nothing
	// passes a retry.
	return w.sleep(ctx, r.t, r.wait, r.recheck, r.rnow, r.gen, r.sub, r.t.qi != queueRetry)
}

// taken is a ticket the script gave, and what a sleep on it needs.
type taken struct {
	t             ticket
	wait, recheck time.Duration // until its turn; until a cut's step (< 0: none)
	rnow          int64         // Redis's clock at the call, µs
	gen           uint64        // pushes.mark before the call
	sub           subState
	refused       bool // err is a *throttle.DeadlineError or ErrQueueFull's: nothing kept
}

// takeX asks the script for a ticket of n units in queue qi (op wait),
// with its cost in the Limiter's further limits (xargs; nil: none),
// refused if its turn is past ctx's deadline. A Limiter with further
// limits takes every ticket through op mwait, so that the script keeps
// every ticket's cost in them. An error with refused false is the
// store's (or ctx's: see errCaller), for the FailMode.
func (w *keyWaiter) takeX(ctx context.Context, n, qi int, x []any) (taken, error) {
	q := w.q
	op := "wait"
	if q.xconfig() != nil {
		if x == nil {
			x = q.xargs(make([]float64, len(q.xconfig().units)))
		}
		op = "mwait"
	}
	maxWait := "" // no deadline: any turn will do
	if deadline, ok := ctx.Deadline(); ok {
		// Relative to this process's monotonic clock, like the returned wait.
		maxWait = strconv.FormatInt(max(0, time.Until(deadline).Microseconds()), 10)
	}
	// What this process knows of the key (its state's id, its last turn,
	// a pause): the script carries it over to a state that Redis lost.
	known, floor, hold := q.memo.args(w.rkey)
	// A push read before the call is one the script has seen; one after,
	// and before this wait listens, is seen through gen (see sleep).
	gen, sub := q.pushes.mark()
	a := waitArgs{N: n, Queue: qi, Maxwait: maxWait, KnownID: known}
	if q.MaxQueued > 0 {
		a.Maxqueued = q.MaxQueued
	}
	// A last turn and a pause this process does not know (the common
	// case) need not travel: the script reads a missing argument as none,
	// and each argument costs Redis about a microsecond (trailing ones
	// left nil are not sent).
	if floor != "" {
		a.KnownFloor = floor
	}
	if hold != "" {
		a.KnownHold = hold
	}
	if x != nil {
		a.Xspec, a.Xcost = x[0], x[1:]
	}
	args := a.append(make([]any, 0, argWaitXcost-headerLen+len(x)))
	reply, err := w.run(ctx, op, args...)
	if lerr := w.limitsError(err); lerr != nil {
		return taken{refused: true}, lerr // the store answered: no fail mode
	}
	if err != nil {
		return taken{}, err
	}
	if len(reply) != 6 && len(reply) != 7 {
		return taken{}, fmt.Errorf("unexpected reply %v from the schedule script", reply)
	}
	r := taken{
		t:    ticket{id: reply[rwaitID], qi: qi, n: n, end: reply[rwaitEnd]},
		wait: usDuration(reply[rwaitWait]), recheck: usDuration(reply[rwaitRecheck]),
		rnow: reply[rwaitNow], gen: gen, sub: sub,
	}
	if op == "wait" {
		learned := time.Time{} // none
		if len(reply) == rwaitReset+1 {
			learned = time.Now().Add(usDuration(reply[rwaitReset]))
		}
		q.memo.learn(w.rkey, learned)
	}
	if reply[rwaitStatus] == statusFull {
		q.memo.state(w.rkey, r.t.id) // nothing kept: no turn of this process
		err := fmt.Errorf("throttle/distributed: wait for %d units of %q would queue past MaxQueued %d: %w", n, w.key, q.MaxQueued, throttle.ErrQueueFull)
		q.emitCall(ctx, throttle.Event{Kind: throttle.EventQueueFull, Key: w.key, Units: float64(n), Err: err})
		return taken{refused: true}, err
	}
	if reply[rwaitStatus] != statusOK {
		q.memo.state(w.rkey, r.t.id) // nothing kept: no turn of this process
		return taken{refused: true}, &throttle.DeadlineError{Key: w.key, Delay: r.wait}
	}
	if deadline, ok := ctx.Deadline(); ok && r.wait > 0 && time.Until(deadline) <= r.wait {
		// The script compared the turn with the time left when the call
		// was sent; the round trip used some of it, and the turn is now
		// past the deadline. Give it back rather than sleep into it.
		q.memo.state(w.rkey, r.t.id)
		w.cancel(ctx, r.t)
		return taken{refused: true}, &throttle.DeadlineError{Key: w.key, Delay: r.wait}
	}
	q.memo.ticket(w.rkey, r.t.id, qi, r.t.end, time.Now().Add(r.wait))
	return r, nil
}

// sleep sleeps until the ticket's turn, wait from now, and returns the
// turn in µs of Redis's clock. Its turn is asked again (see pushes.ask:
// one call for every wait of the key sleeping in this process) when a
// push concerns it (a pause, a cut, a window, a refund ahead of it), at
// recheck (a cut's pace steps; negative: never), and before going if a
// push could have been missed: the subscription was not up when the
// turn was learned, or went down since (gen, sub: see pushes.mark before
// the reserving call). If ctx ends, or a moved turn falls past its
// deadline, the units are given back. If Redis cannot answer a question,
// the wait keeps the turn it has.
func (w *keyWaiter) sleep(ctx context.Context, t ticket, wait, recheck time.Duration, rnow int64, gen uint64, sub subState, confirm bool) (int64, error) {
	p := &w.q.pushes
	s := p.addTicket(w, t, gen, sub)
	defer p.remove(s)
	start := time.Now()
	wake := start.Add(wait)
	turn := rnow + wait.Microseconds()
	check := time.Time{}
	if recheck >= 0 {
		check = start.Add(recheck)
	}
	// going: the turn came, and an answer is awaited before going.
	going := false
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		next := wake
		if going {
			next = time.Now().Add(time.Hour) // the answer ends the wait (within Timeout)
		}
		if !check.IsZero() && check.Before(next) {
			next = check
		}
		timer.Reset(time.Until(next))
		select {
		case <-timer.C:
			now := time.Now()
			if !check.IsZero() && !now.Before(check) {
				check = time.Time{}
				p.ask(s) // a cut's step
				continue
			}
			if now.Before(wake) || going {
				continue
			}
			if !confirm && p.settled(s) {
				return turn, nil
			}
			// A push may concern the turn, or could have been missed:
			// ask before going.
			p.ask(s)
			going = true
			continue
		case <-s.sig:
		case <-ctx.Done():
			if !time.Now().Before(wake) && p.settled(s) {
				// The turn came as ctx ended: the script lets the
				// ticket go at its turn, so it went (as a Limiter's
				// wait whose turn came returns nil, its ctx ended or not).
				return turn, nil
			}
			// Return at once; the units go back in the background (a
			// round trip that a cancelled caller need not wait for).
			w.q.refunds.Go(func() { w.cancel(ctx, t) })
			return 0, ctx.Err()
		}
		a := p.answer(s)
		if a == nil {
			continue
		}
		reply, err := a.reply, a.err
		// The ticket's wait, then turns' reply's fields (see answers).
		const wait, fields = 0, 1
		if err == nil && len(reply) == fields+rturnsReset+1 {
			learned := time.Now().Add(usDuration(reply[fields+rturnsReset]))
			w.q.memo.learn(w.rkey, learned)
			reply = reply[:fields+rturnsReset]
		} else if err == nil && len(reply) == fields+rturnsReset {
			w.q.memo.learn(w.rkey, time.Time{}) // no learned budget's window
		}
		if err == nil && len(reply) == fields+rturnsReset && reply[wait] == turnGone {
			// Gone: its turn has come.
			w.q.memo.ticket(w.rkey, t.id, t.qi, t.end, time.Now())
			return min(turn, reply[fields+rturnsNow]), nil
		}
		if err != nil || len(reply) != fields+rturnsReset {
			if ctx.Err() != nil {
				w.q.refunds.Go(func() { w.cancel(ctx, t) })
				return 0, ctx.Err()
			}
			// Redis cannot say: keep the turn this wait has.
			check = time.Time{}
			if !time.Now().Before(wake) {
				return turn, nil
			}
			continue
		}
		rnow = reply[fields+rturnsNow]
		if ctx.Err() != nil {
			w.q.refunds.Go(func() { w.cancel(ctx, t) })
			return 0, ctx.Err()
		}
		if reply[wait] == turnLost { // the state it came from is lost: queue again
			p.remove(s)
			_, err := w.wait(ctx, throttle.Cost{N: t.n, Retry: t.qi == queueRetry})
			return rnow, err
		}
		left := usDuration(reply[wait])
		now := time.Now()
		wake, turn, going = now.Add(left), rnow+reply[wait], false
		w.q.memo.ticket(w.rkey, t.id, t.qi, t.end, wake)
		check = time.Time{}
		if reply[fields+rturnsRecheck] >= 0 {
			check = now.Add(usDuration(reply[fields+rturnsRecheck]))
		}
		if left <= 0 {
			return turn, nil
		}
		if deadline, ok := ctx.Deadline(); ok && wake.After(deadline) {
			w.cancel(ctx, t)
			return 0, &throttle.DeadlineError{Key: w.key, Delay: left}
		}
	}
}

// turnsOf asks the turns of the sleepers' tickets (op turns: one call per
// state id, nearly always one), and returns an answer for each, marked
// with mark, the subscription before the call.
func (w *keyWaiter) turnsOf(ss []*sleeper, mark subState) []turnAnswer {
	out := make([]turnAnswer, len(ss))
	done := make([]bool, len(ss))
	for i := range ss {
		if done[i] {
			continue
		}
		id := ss[i].t.id
		a := turnsArgs{ID: id}
		var idx []int
		for j := i; j < len(ss); j++ {
			if t := ss[j].t; !done[j] && t.id == id {
				a.Tickets = append(a.Tickets, t.qi, t.end)
				idx = append(idx, j)
				done[j] = true
			}
		}
		// Not cut by any wait's ctx: a ticket whose turn came went, ctx
		// ended or not (the call is bounded by Timeout).
		reply, err := w.run(context.Background(), "turns", a.append(nil)...)
		k := len(idx)
		if err == nil && len(reply) != k+rturnsReset && len(reply) != k+rturnsReset+1 {
			err = fmt.Errorf("unexpected reply %v from the schedule script", reply)
		}
		for x, j := range idx {
			a := turnAnswer{err: err, mark: mark}
			if err == nil {
				// The ticket's wait, then the reply's common tail.
				a.reply = append([]int64{reply[x]}, reply[k:]...)
			}
			out[j] = a
		}
	}
	return out
}

// cancel gives the ticket's units back (best effort, bounded by Timeout):
// the tickets behind it move up.
func (w *keyWaiter) cancel(ctx context.Context, t ticket) {
	// ctx may have ended; the refund still needs a live context, bounded
	// by the Timeout that call adds.
	_, _ = w.run(context.WithoutCancel(ctx), "cancel", t.cancelArgs().append(nil)...)
}

// fail applies the FailMode to a wait for c the store could not serve.
func (w *keyWaiter) fail(ctx context.Context, c throttle.Cost, cause error) error {
	q := w.q
	if answered(cause) {
		return cause // no store failure: no fail mode
	}
	q.fellBack(ctx, w.key, cause)
	switch q.FailMode {
	case FailOpen:
		return nil
	case FailClosed:
		return unavailable(cause)
	}
	if q.xconfig() != nil {
		return q.localX.wait(ctx, q, w, c)
	}
	workers := max(1, q.Workers)
	conf := q.config()
	lim := q.local.get(w.key, conf.limit, conf.burst, workers, q.clock())
	return waitLocal(ctx, lim, w.key, c.N, q.clock, &q.memo, w.rkey)
}

// maxPause caps a pause: longer ones are cut to it. A server asking for more
// than a week is broken, and the cap keeps Redis's µs arithmetic exact.
const maxPause = 7 * 24 * time.Hour

// us formats d, capped at maxPause, in whole µs rounded up.
func us(d time.Duration) string {
	d = min(max(d, 0), maxPause)
	return strconv.FormatInt(int64((d+time.Microsecond-1)/time.Microsecond), 10)
}

// Pause holds every caller of the key, in every process, until d from
// now: see [throttle.Quota]. It writes "nothing before now+d" (Redis's
// clock) into the key's state (d is capped at a week), with a context
// of its own bounded by Timeout, so that the request's context ending a
// moment later does not lose it: every queued turn, in every process,
// comes no earlier, and at the pause's end the queue goes on at the
// key's pace, at most a burst at once. A pause never shortens a longer
// one. The process remembers the pause too (FailLocal honours it, and a
// state Redis lost takes it on). A failed Pause returns an error
// matching [ErrStoreUnavailable], whatever the FailMode.
func (w *keyWaiter) Pause(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	// This process knows the pause even if Redis does not: FailLocal
	// honours it, and a state Redis lost gets it back.
	w.q.memo.pause(w.rkey, time.Now().Add(min(d, maxPause)))
	// The pause is written with a context of its own, bounded by Timeout:
	// a request's context that ends a moment later must not lose it.
	_, err := w.run(context.WithoutCancel(ctx), "pause", pauseArgs{D: us(d)}.append(nil)...)
	if err != nil {
		return fmt.Errorf("pausing %q: %w", w.key, unavailable(err))
	}
	return nil
}

// anyUnits reports whether c names units of further limits (not zero).
func anyUnits(c throttle.Cost) bool {
	for _, v := range c.Units {
		if v != 0 {
			return true
		}
	}
	return false
}
