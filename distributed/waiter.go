package distributed

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/throttle-go/throttle"
)

// keyWaiter is one bucket of a Quota: what Quota.For returns. Its fields
// are set by For and read-only afterwards.
type keyWaiter struct {
	q    *Quota
	key  string   // the user's key, for errors
	rkey string   // the Redis key (see redisKey)
	keys []string // {rkey}, the scripts' KEYS
	// channel is where pause.lua and adapt.lua announce the key's pauses
	// (see pauseChannel).
	channel string

	// The scripts' fixed arguments, converted and boxed once: a wait
	// then allocates only what the round trip itself needs.
	interval any // string: µs per unit
	burst    any // int
}

func newKeyWaiter(q *Quota, key string) *keyWaiter {
	rkey := redisKey(q.Prefix, q.name, key)
	return &keyWaiter{q: q, key: key, rkey: rkey, keys: []string{rkey}, channel: pauseChannel(q.Prefix, q.name), interval: q.interval(), burst: q.burst}
}

// WaitN implements throttle.Waiter; see Quota.For for the contract.
func (w *keyWaiter) WaitN(ctx context.Context, n int) error {
	_, err := w.waitN(ctx, n)
	return err
}

// waitN is WaitN that also returns the turn it waited for, in µs of
// Redis's clock; 0 when no turn came from Redis (n = 0, a fail mode).
func (w *keyWaiter) waitN(ctx context.Context, n int) (turn int64, err error) {
	q := w.q
	if err := q.check(n); err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, nil
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	for {
		// A change of the server's window read before the call is one
		// the script has seen: see changes.
		gen := q.changes.gen.Load()
		maxWait := "" // no deadline: any turn will do
		if deadline, ok := ctx.Deadline(); ok {
			// Relative to this process's monotonic clock, like the returned wait.
			maxWait = strconv.FormatInt(max(0, time.Until(deadline).Microseconds()), 10)
		}
		cmd, err := q.call(ctx, reserveScript, w.keys, w.interval, w.burst, n, maxWait)
		if err != nil {
			if errCaller(ctx, err) {
				return 0, err
			}
			return 0, w.fail(ctx, n, err)
		}
		reply, err := cmd.Int64Slice()
		if err != nil || len(reply) != 3 {
			return 0, w.fail(ctx, n, fmt.Errorf("unexpected reply %v from reserve script: %v", cmd.Val(), err))
		}
		wait, turn := time.Duration(reply[1])*time.Microsecond, reply[2]
		switch reply[0] {
		case 1:
		case 2:
			// The server's window is spent: nothing was reserved. Sleep
			// until its reset (or a probe's timeout), or until a response
			// to this process says more, and reserve again.
			if err := w.sleepBlocked(ctx, wait, gen); err != nil {
				return 0, err
			}
			continue
		default:
			return 0, &throttle.DeadlineError{Key: w.key, Delay: wait}
		}
		if wait <= 0 {
			return turn, nil
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
			// The script compared the turn with the time left when the call
			// was sent; the round trip used some of it, and the turn is now
			// past the deadline. Give it back rather than sleep into it.
			w.refund(ctx, n)
			return 0, &throttle.DeadlineError{Key: w.key, Delay: wait}
		}
		return w.sleepTurn(ctx, n, wait, turn)
	}
}

// sleepTurn sleeps wait until turn (µs of Redis's clock), the n units'
// reserved turn, and returns the turn it went at. A pause of the key
// announced meanwhile (see pauses) that covers the turn moves it back by
// the pause's length, as the script that wrote the pause moved the queue,
// so the turns keep their spacing; all of it in differences of Redis's
// µs, never comparing this process's clock with Redis's. If ctx ends, or
// a moved turn falls past its deadline, the units are given back.
func (w *keyWaiter) sleepTurn(ctx context.Context, n int, wait time.Duration, turn int64) (int64, error) {
	wake := time.Now().Add(wait)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var sig <-chan struct{}
	var s *sleeper
	if wait >= minPushedSleep {
		s = w.q.pauses.add(w.q, w.rkey)
		defer w.q.pauses.remove(s)
		sig = s.sig
	}
	reserved := turn - wait.Microseconds() // when the script ran
	for {
		select {
		case <-timer.C:
			return turn, nil
		case <-ctx.Done():
			w.refund(ctx, n)
			return 0, ctx.Err()
		case <-sig:
		}
		moved := false
		for _, p := range w.q.pauses.take(s) {
			// Reserved before the pause was written (at the same µs only
			// if the turn is inside it: a later reservation's is not), and
			// the turn is at or after the pause's start: the scripts moved
			// it, so this wait moves too.
			before := reserved < p.now || reserved == p.now && turn < p.end
			if before && turn >= p.start {
				shift := p.end - p.start
				turn += shift
				wake = wake.Add(time.Duration(shift) * time.Microsecond)
				moved = true
			}
		}
		if !moved {
			continue
		}
		left := time.Until(wake)
		if deadline, ok := ctx.Deadline(); ok && wake.After(deadline) {
			w.refund(ctx, n)
			return 0, &throttle.DeadlineError{Key: w.key, Delay: left}
		}
		timer.Reset(left)
	}
}

// sleepBlocked sleeps d (the script checked it against ctx's deadline),
// or until a response to this process changes a window (see changes), or
// until ctx ends. Nothing is reserved, so nothing is given back.
func (w *keyWaiter) sleepBlocked(ctx context.Context, d time.Duration, gen uint64) error {
	changed, now := w.q.changes.wait()
	if now != gen {
		return nil // changed since the script read the window
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-changed:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// refund gives n units back (refund.lua), best effort, bounded by Timeout.
func (w *keyWaiter) refund(ctx context.Context, n int) {
	// ctx has ended; the refund still needs a live context, bounded by
	// the Timeout that call adds.
	_, _ = w.q.call(context.WithoutCancel(ctx), refundScript, w.keys, w.interval, n)
}

// fail applies the FailMode to a wait the store could not serve.
func (w *keyWaiter) fail(ctx context.Context, n int, cause error) error {
	q := w.q
	switch q.FailMode {
	case FailOpen:
		return nil
	case FailClosed:
		return unavailable(cause)
	}
	workers := max(1, q.Workers)
	lim := q.local.get(w.key, q.limit, q.burst, workers, q.clock())
	return waitLocal(ctx, lim, w.key, n, q.clock)
}

// maxPause caps a pause: longer ones are cut to it. A server asking for more
// than a week is broken, and the cap keeps Redis's µs arithmetic exact.
const maxPause = 7 * 24 * time.Hour

// Pause implements throttle.Pauser; see Quota.For.
func (w *keyWaiter) Pause(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	d = min(d, maxPause)
	us := strconv.FormatInt(int64((d+time.Microsecond-1)/time.Microsecond), 10)
	_, err := w.q.call(ctx, pauseScript, w.keys, us, w.channel, w.interval, w.burst)
	if err != nil {
		if errCaller(ctx, err) {
			return err
		}
		return fmt.Errorf("pausing %q: %w", w.key, unavailable(err))
	}
	return nil
}

// Adapt implements [throttle.Adapter]; see Quota.For. A Feedback that
// says nothing (no pause, no window, no rejection) costs nothing.
func (w *keyWaiter) Adapt(ctx context.Context, f throttle.Feedback) error {
	if f.Pause <= 0 && !f.HasWindow && !f.Throttled {
		return nil
	}
	us := func(d time.Duration) string {
		d = min(max(d, 0), maxPause)
		return strconv.FormatInt(int64((d+time.Microsecond-1)/time.Microsecond), 10)
	}
	remaining, reset, size, length := "", "0", "0", "0"
	if f.HasWindow && !math.IsNaN(f.Remaining) && !math.IsNaN(f.Size) {
		remaining = strconv.FormatFloat(max(f.Remaining, 0), 'g', -1, 64)
		reset, length = us(f.Reset), us(f.Window)
		size = strconv.FormatFloat(max(f.Size, 0), 'g', -1, 64)
	}
	age := ""
	if f.Throttled {
		age = us(f.Age)
	}
	cmd, err := w.q.call(ctx, adaptScript, w.keys, w.interval, us(f.Pause), remaining, reset, size, length, age, w.burst, us(f.Age), w.channel)
	if err != nil {
		if f.Pause <= 0 || errCaller(ctx, err) {
			// What was lost is advice; the next response says it again.
			return nil
		}
		return fmt.Errorf("pausing %q: %w", w.key, unavailable(err))
	}
	if admits, _ := cmd.Int64(); admits == 1 {
		w.q.changes.notify()
	}
	return nil
}
