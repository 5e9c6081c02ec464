package distributed

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/throttle-go/throttle"
	"golang.org/x/time/rate"
)

// Reserve takes a turn for cost without waiting: see [throttle.Quota].
// One script call takes a ticket in the key's queue, as a wait does (a
// reservation is a ticket), and returns it without sleeping. Checks and
// deadline are a wait's (see Wait): a turn past ctx's deadline reserves
// nothing. If Redis cannot answer, FailMode decides: FailOpen returns a
// turn that has come, FailClosed an error matching
// [ErrStoreUnavailable], FailLocal a reservation of this process's
// fallback.
//
// The Reservation's Delay is the turn as learned at Reserve, not asked
// again (a move of the queue since, a pause or a cancel ahead, shows in
// Wait, which asks); Cancel is one script call, bounded by Timeout (or,
// while a Wait sleeps on the reservation, the refund that Wait's end
// makes), and gives every unit back on every limit; Wait sleeps as a
// wait does, woken by moves of the queue pushed from any process.
func (w *keyWaiter) Reserve(ctx context.Context, cost ...throttle.Cost) (throttle.Reservation, error) {
	return w.reserve(ctx, sum(cost))
}

// ReserveN takes a turn for n units of the first limit: Reserve of
// Cost{N: n}.
func (w *keyWaiter) ReserveN(ctx context.Context, n int) (throttle.Reservation, error) {
	return w.reserve(ctx, throttle.Cost{N: n})
}

// reserve is Reserve of c.
func (w *keyWaiter) reserve(ctx context.Context, c throttle.Cost) (throttle.Reservation, error) {
	q := w.q
	n, qi := c.N, q.queueOf(ctx, c)
	if err := q.check(n); err != nil {
		return nil, err
	}
	cost, err := q.costOf(c)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		if anyUnits(c) {
			return nil, fmt.Errorf("%w: a cost of no unit of the first limit (N 0) names units %v: a wait is at least one unit of its first limit", throttle.ErrInvalidLimit, c.Units)
		}
		return &reservation{w: w, state: resDone}, nil // nothing to spend: see wait
	}
	x := q.xargs(cost)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r, err := w.takeX(ctx, n, qi, x)
	if err != nil {
		if errCaller(ctx, err) || r.refused {
			return nil, err
		}
		return w.reserveFail(ctx, c, err)
	}
	res := &reservation{w: w, taken: r, wake: time.Now().Add(r.wait)}
	if r.wait <= 0 {
		res.state = resDone // gone at once
	}
	return res, nil
}

// A reservation's states.
const (
	resHeld    = iota // the ticket is queued, no Wait sleeps on it
	resWaiting        // a Wait sleeps on it
	resDone           // gone, cancelled or given back
)

// reservation is a ticket of the key's queue in Redis.
type reservation struct {
	w     *keyWaiter
	taken taken

	mu    sync.Mutex         // protects the fields below
	wake  time.Time          // the turn as last learned, on this process's clock
	state int                // resHeld, resWaiting, resDone
	stop  context.CancelFunc // ends the sleeping Wait, while resWaiting
	// cancelled: the units were given back (or lost trying), by Cancel
	// or by a Wait that ended early.
	cancelled bool
}

// Delay implements [throttle.Reservation]: the turn as last learned.
func (r *reservation) Delay() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state == resDone {
		return 0
	}
	return max(time.Until(r.wake), 0)
}

// Cancel implements [throttle.Reservation].
func (r *reservation) Cancel() {
	r.mu.Lock()
	switch r.state {
	case resDone:
		r.mu.Unlock()
	case resWaiting:
		// The sleeping Wait gives the units back as it ends.
		r.stop()
		r.mu.Unlock()
	default:
		r.state = resDone
		r.mu.Unlock()
		t := r.taken.t
		reply, err := r.w.run(context.Background(), "cancel", t.cancelArgs().append(nil)...)
		// Back (1), or lost with a store that failed: either way not to
		// be waited for. 0: the turn had come, the units were spent.
		r.mu.Lock()
		r.cancelled = err != nil || len(reply) == rcancelBack+1 && reply[rcancelBack] == backYes
		r.mu.Unlock()
	}
}

// errWaiting: see Wait.
var errWaiting = errors.New("throttle/distributed: Wait called on a reservation another Wait sleeps on; wait on it once")

// Wait implements [throttle.Reservation]. One Wait at a time may sleep on
// a reservation: a second, while the first sleeps, returns an error.
func (r *reservation) Wait(ctx context.Context) error {
	r.mu.Lock()
	switch r.state {
	case resDone:
		cancelled := r.cancelled
		r.mu.Unlock()
		if cancelled {
			return context.Canceled
		}
		return nil
	case resWaiting:
		r.mu.Unlock()
		return errWaiting
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	r.state, r.stop = resWaiting, stop
	wake := r.wake
	r.mu.Unlock()
	t := r.taken
	_, err := r.w.sleep(wctx, t.t, time.Until(wake), t.recheck, t.rnow, t.gen, t.sub, t.t.qi != queueRetry)
	r.mu.Lock()
	r.state = resDone
	if err == nil {
		r.wake = time.Now()
	} else {
		r.cancelled = true // sleep gave the units back
	}
	r.mu.Unlock()
	if err != nil && ctx.Err() == nil && wctx.Err() != nil {
		return context.Canceled // Cancel ended it
	}
	return err
}

// reserveFail applies the FailMode to a reservation of c the store could
// not serve.
func (w *keyWaiter) reserveFail(ctx context.Context, c throttle.Cost, cause error) (throttle.Reservation, error) {
	q := w.q
	if answered(cause) {
		return nil, cause // no store failure: no fail mode
	}
	q.fellBack(ctx, w.key, cause)
	switch q.FailMode {
	case FailOpen:
		return &reservation{w: w, state: resDone}, nil
	case FailClosed:
		return nil, unavailable(cause)
	}
	if q.xconfig() != nil {
		return q.localX.reserve(ctx, q, w, c)
	}
	conf := q.config()
	lim := q.local.get(w.key, conf.limit, conf.burst, max(1, q.Workers), q.clock())
	now := q.clock()
	lr := lim.ReserveN(now, c.N)
	delay := lr.DelayFrom(now)
	if nb := q.memo.notBefore(w.rkey); nb.After(now.Add(delay)) {
		delay = nb.Sub(now)
	}
	if deadline, ok := ctx.Deadline(); ok && delay > time.Until(deadline) {
		lr.CancelAt(now)
		return nil, &throttle.DeadlineError{Key: w.key, Delay: delay}
	}
	q.memo.local(w.rkey, now.Add(delay))
	return &localReservation{r: lr, wake: time.Now().Add(delay), clock: q.clock}, nil
}

// localReservation is a reservation of a FailLocal bucket.
type localReservation struct {
	r     *rate.Reservation
	wake  time.Time
	clock func() time.Time

	mu   sync.Mutex // protects done
	done bool       // cancelled
}

func (l *localReservation) Delay() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return 0
	}
	return max(time.Until(l.wake), 0)
}

func (l *localReservation) Cancel() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done && time.Until(l.wake) > 0 {
		l.done = true
		l.r.CancelAt(l.clock())
	}
}

func (l *localReservation) Wait(ctx context.Context) error {
	d := l.Delay()
	l.mu.Lock()
	done := l.done
	l.mu.Unlock()
	if done {
		return context.Canceled
	}
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		l.Cancel()
		return ctx.Err()
	}
}

var (
	_ throttle.Reservation = (*reservation)(nil)
	_ throttle.Reservation = (*localReservation)(nil)
)
