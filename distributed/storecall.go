package distributed

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttle-go/throttle"
)

// lateBound bounds how long a call that a wait stopped waiting for (at
// Timeout, or as its context ended) is left to finish in the background,
// so that its outcome is still learned: a real cause for the errors that
// follow, or a ticket to give back. A client that ignores context
// deadlines bounds it with its own read timeout instead.
const lateBound = 3 * time.Second

// The hand-off of one call's result between the goroutine that makes it
// and the wait that asked for it: whichever moves the state away from
// callPending first decides who handles the result.
const (
	callPending  int32 = iota
	callTaken          // the wait took the result in time
	callTimedOut       // the wait gave up at Timeout: a store failure
	callLeft           // the wait's context ended first: says nothing about the store
)

// storeCall is one call in flight.
type storeCall struct {
	state atomic.Int32
	done  chan *redis.Cmd // capacity 1; receives the result if state became callTaken
}

// call runs script on keys through the breaker and returns by Timeout
// whatever the client's options. Through a client that honours context
// deadlines it calls inline (callInline). Otherwise (go-redis's default:
// the client ignores a context's deadline while it reads a reply) the
// call runs in a goroutine of its own, with a context that Timeout does
// not cut, so that its outcome is learned even after the wait stopped
// waiting: the real cause of a failure (a client that honours deadlines
// hides it behind "context deadline exceeded" when the deadline cuts its
// retries), or a ticket to give back. key is the user's key, for events.
//
// The error is the store's failure (a *timeoutError if Redis did not
// answer within Timeout), or an errBreakerOpen while the breaker keeps
// calls away, or the caller's ctx.Err() (not a store failure) when ctx
// ended first, or the store's answer: a configuration refused (see
// isConfig) or an error the script raised (a *scriptError), which the
// breaker counts as the success of a call that Redis answered. Store failures carry the most recent real cause this
// Limiter saw, so that errors.Is and errors.As reach it.
//
// A call the wait stopped waiting for still reaches Redis, and may take a
// ticket there: see giveBack.
func (q *Limiter) call(ctx context.Context, key string, s *redis.Script, keys []string, args ...any) (*redis.Cmd, error) {
	ok, probe := q.br.allow(q.clock())
	if !ok {
		return nil, q.openError()
	}
	if q.honoursDeadlines() {
		return q.callInline(ctx, key, probe, s, keys, args)
	}
	timeout := q.timeout()
	c := &storeCall{done: make(chan *redis.Cmd, 1)}
	q.refunds.Add(1)
	go q.runCall(ctx, key, c, s, keys, args)
	t := time.NewTimer(timeout)
	defer t.Stop()
	var cmd *redis.Cmd
	select {
	case cmd = <-c.done:
	case <-t.C:
		if c.state.CompareAndSwap(callPending, callTimedOut) {
			// The store error is reported when the call ends, with its
			// real outcome (see runCall).
			err := &timeoutError{timeout: timeout, last: q.health.last()}
			q.breakerFailed(ctx, key, probe, err)
			return nil, err
		}
		cmd = <-c.done
	case <-ctx.Done():
		if c.state.CompareAndSwap(callPending, callLeft) {
			q.br.done(q.clock(), probe, abandoned)
			return nil, ctx.Err()
		}
		cmd = <-c.done
	}
	err := cmd.Err()
	switch {
	case err == nil:
		q.succeeded(ctx, key, probe)
		return cmd, nil
	case isConfig(err):
		q.succeeded(ctx, key, probe) // the store answered
		return cmd, err
	case scriptFault(err):
		q.succeeded(ctx, key, probe) // the store answered
		return cmd, &scriptError{err: err}
	case ctx.Err() != nil:
		q.br.done(q.clock(), probe, abandoned)
		return nil, ctx.Err()
	}
	q.health.set(err)
	q.failed(ctx, key, probe, err)
	return cmd, err
}

// honoursDeadlines reports whether calls can run inline, ending by
// Timeout: through a go-redis client, failover client, Cluster or Ring
// with ContextTimeoutEnabled; and through a *redis.Client (a failover
// client too) without it, by way of its WithTimeout copy (the same pool
// and hooks, read and write timeouts of Timeout: a read past Timeout
// fails, and its retry finds the call's context ended). Such a call needs
// no goroutine of its own, which costs a scheduling hand-off per call.
// Cluster and Ring clients without ContextTimeoutEnabled have no
// such copy: their calls run in a goroutine of their own.
func (q *Limiter) honoursDeadlines() bool {
	q.honoursOnce.Do(func() {
		q.inline = q.client
		switch c := q.client.(type) {
		case *redis.Client:
			q.honours = true
			if !c.Options().ContextTimeoutEnabled {
				q.inline = c.WithTimeout(q.timeout())
			}
		case *redis.ClusterClient:
			q.honours = c.Options().ContextTimeoutEnabled
		case *redis.Ring:
			q.honours = c.Options().ContextTimeoutEnabled
		}
	})
	return q.honours
}

// callInline is call for a client that honours deadlines: the call runs
// on the caller's goroutine with a context that ends at Timeout. The
// client then hides the cause behind "context deadline exceeded" (it was
// still retrying a dial, say), and closes the connection, so the reply of
// a call that reached Redis is lost (its ticket too: see giveBack); a
// timeout starts one PING in the background, bounded by lateBound, whose
// outcome is the cause the next errors carry and the store-error event
// reports.
//
// The caller's context does not cut the call (Timeout does): a call cut
// as its reply comes loses the reply, and a "wait" that reached Redis
// took a ticket that nobody would give back. A wait whose context ends
// during the call returns when Redis answers (within Timeout), and its
// ticket is given back (see giveBack).
func (q *Limiter) callInline(ctx context.Context, key string, probe bool, s *redis.Script, keys []string, args []any) (*redis.Cmd, error) {
	timeout := q.timeout()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	cmd := s.Run(cctx, q.inline, keys, args...)
	cancel()
	err := cmd.Err()
	switch {
	case err == nil:
		q.succeeded(ctx, key, probe)
		if ctx.Err() != nil {
			q.refunds.Go(func() {
				gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lateBound)
				defer cancel()
				q.giveBack(gctx, s, keys, args, cmd)
			})
			return nil, ctx.Err()
		}
		return cmd, nil
	case isConfig(err):
		q.succeeded(ctx, key, probe) // the store answered
		return cmd, err
	case scriptFault(err):
		q.succeeded(ctx, key, probe) // the store answered
		return cmd, &scriptError{err: err}
	case ctx.Err() != nil:
		q.br.done(q.clock(), probe, abandoned)
		return nil, ctx.Err()
	case errors.Is(err, context.DeadlineExceeded):
		terr := &timeoutError{timeout: timeout, last: q.health.last()}
		q.breakerFailed(ctx, key, probe, terr)
		q.diagnose(ctx, key, timeout)
		return nil, terr
	}
	q.health.set(err)
	q.failed(ctx, key, probe, err)
	return cmd, err
}

// diagnose learns why Redis did not answer in time: one PING at a time,
// in the background, bounded by lateBound. Its error is the cause the
// next errors carry; the store-error event reports it (or that Redis
// answered, late).
func (q *Limiter) diagnose(ctx context.Context, key string, timeout time.Duration) {
	if !q.diagnosing.CompareAndSwap(false, true) {
		return
	}
	q.refunds.Go(func() {
		defer q.diagnosing.Store(false)
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lateBound)
		defer cancel()
		start := time.Now()
		err := q.client.Ping(dctx).Err()
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			// lateBound cut it: that says no more than the timeout did.
			err = fmt.Errorf("redis did not answer within %v (Limiter.Timeout), nor a PING within %v", timeout, lateBound)
		case err != nil:
			q.health.set(err)
		default:
			err = fmt.Errorf("redis did not answer within %v (Limiter.Timeout; raise it if Redis is far or busy); a PING then took %v", timeout, time.Since(start).Round(time.Millisecond))
		}
		q.emit(ctx, throttle.Event{Kind: throttle.EventStoreError, Key: key, Err: err})
	})
}

// runCall makes the call of c and hands its result over, or handles it
// itself if the wait has gone.
func (q *Limiter) runCall(ctx context.Context, key string, c *storeCall, s *redis.Script, keys []string, args []any) {
	defer q.refunds.Done()
	start := time.Now()
	// Values (traces) are kept; the caller's cancellation is not: the
	// outcome must be learned even if the caller has gone.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lateBound)
	defer cancel()
	cmd := s.Run(rctx, q.client, keys, args...)
	if c.state.CompareAndSwap(callPending, callTaken) {
		c.done <- cmd
		return
	}
	timedOut := c.state.Load() == callTimedOut
	if err := cmd.Err(); err != nil {
		if timedOut && !scriptFault(err) {
			q.health.set(err) // the cause the next errors carry
			q.emit(ctx, throttle.Event{Kind: throttle.EventStoreError, Key: key, Err: err})
		}
		return
	}
	if timedOut {
		q.emit(ctx, throttle.Event{Kind: throttle.EventStoreError, Key: key, Err: fmt.Errorf("redis answered after %v, beyond Limiter.Timeout %v (raise it if Redis is far or busy)", time.Since(start).Round(time.Millisecond), q.timeout())})
	}
	q.giveBack(rctx, s, keys, args, cmd)
}

// giveBack returns the ticket that a late "wait" call took (the wait had
// gone to its fail mode, or its context ended): the tickets behind it move
// up, so a stall does not lose units.
//
// What cannot be given back: a ticket whose turn had already come when the
// script ran (the units are spent, as the script releases a turn that has
// come at once), and a call whose reply never arrived (the client's read
// timed out or lateBound passed while the script still ran after a stall).
// Each such call loses at most its own cost, never more than one call per
// wait that went to the fail mode while the breaker let calls through
// (breakerThreshold, then one probe per breakerCooldown), and a lost unit
// errs on the side of the API's limit: the fleet sends less, never more.
func (q *Limiter) giveBack(ctx context.Context, s *redis.Script, keys []string, args []any, cmd *redis.Cmd) {
	// args are those of keyWaiter.wait: op, interval, burst, channel, n,
	// queue, …; its reply {status, wait, id, end, recheck, now[, reset]}.
	if s == scheduleScript && len(args) > argLeaseK && args[argOp] == "lease" {
		giveBackLease(ctx, q, keys, args, cmd) // see lease_calls.go
		return
	}
	if s != scheduleScript || len(args) <= argWaitQueue || (args[argOp] != "wait" && args[argOp] != "mwait") {
		return
	}
	v, ok := scriptInts(cmd.Val())
	if !ok || len(v) < rwaitNow+1 || v[rwaitStatus] != statusOK { // a learned reset may follow
		return // no ticket was kept
	}
	c := cancelArgs{ID: v[rwaitID], Queue: args[argWaitQueue], End: v[rwaitEnd], N: args[argWaitN]}
	_ = s.Run(ctx, q.client, keys, c.append(headerArgs{Op: "cancel", Interval: args[argInterval], Burst: args[argBurst], Channel: args[argChannel]}.append(nil))...).Err()
}

// succeeded records a call Redis answered.
func (q *Limiter) succeeded(ctx context.Context, key string, probe bool) {
	switch q.br.done(q.clock(), probe, succeeded) {
	case closed:
		q.recover()
		q.emit(ctx, throttle.Event{Kind: throttle.EventBreakerClose, Key: key})
	case recovered:
		q.recover()
	}
}

// recover starts the next outage afresh: local shares, not buckets that
// refilled to the full burst meanwhile; no stale cause; fallbacks
// reported at once again.
func (q *Limiter) recover() {
	q.local.reset()
	q.localX.reset()
	q.health.reset()
}

// failed records a store failure.
func (q *Limiter) failed(ctx context.Context, key string, probe bool, err error) {
	q.emit(ctx, throttle.Event{Kind: throttle.EventStoreError, Key: key, Err: err})
	q.breakerFailed(ctx, key, probe, err)
}

// breakerFailed counts a failure in the breaker.
func (q *Limiter) breakerFailed(ctx context.Context, key string, probe bool, err error) {
	if q.br.done(q.clock(), probe, failed) == opened {
		q.emit(ctx, throttle.Event{Kind: throttle.EventBreakerOpen, Key: key, Delay: breakerCooldown, Err: err})
	}
}

// openError is the error of a call the open breaker kept away.
func (q *Limiter) openError() error {
	if last := q.health.last(); last != nil {
		return fmt.Errorf("%w; last error: %w", errBreakerOpen, last)
	}
	return errBreakerOpen
}

// fallbackEvery is the least time between two EventFallback of a Limiter
// during one outage: an outage reports its first fallback at once, then
// at most one a second, with the number of waits answered so meanwhile.
const fallbackEvery = time.Second

// fellBack reports a wait answered by the fail mode (rate-limited: see
// fallbackEvery).
func (q *Limiter) fellBack(ctx context.Context, key string, cause error) {
	n, report := q.health.fallback(q.clock())
	if !report {
		return
	}
	var reason string
	switch q.FailMode {
	case FailOpen:
		reason = "FailOpen: admitted without the store"
	case FailClosed:
		reason = "FailClosed: refused"
	default:
		workers := max(1, q.Workers)
		limit := float64(q.config().limit)
		reason = fmt.Sprintf("FailLocal: paced in this process at %g/s (rate %g/s ÷ Workers %d)", limit/float64(workers), limit, workers)
	}
	if n > 1 {
		reason += fmt.Sprintf("; %d waits answered so since the last report", n)
	}
	q.emit(ctx, throttle.Event{Kind: throttle.EventFallback, Key: key, Err: cause, Reason: reason})
}

// emit reports e to OnEvent. Every event of a Limiter goes through here,
// with the context of the wait or call it came from (a call finished in
// the background keeps its values, not its cancellation), so that events
// can also be routed by the context later.
func (q *Limiter) emit(_ context.Context, e throttle.Event) {
	if f := q.OnEvent; f != nil {
		f(e)
	}
}

// emitCall reports e, a decision of a call with ctx, to OnEvent and to
// the function of the call's context ([throttle.EventsFrom]), as a
// [throttle.Limiter] reports its keys' decisions.
func (q *Limiter) emitCall(ctx context.Context, e throttle.Event) {
	q.emit(ctx, e)
	if f := throttle.EventsFrom(ctx); f != nil {
		f(e)
	}
}

// health is what a Limiter knows of the store across calls. Safe for
// concurrent use; the zero value knows nothing.
type health struct {
	mu       sync.Mutex // protects the fields below
	cause    error      // the most recent real failure since Redis last answered
	falling  bool       // a fallback was reported since Redis last answered
	reported time.Time  // when the last fallback was reported
	count    int        // fallbacks since then, unreported
}

func (h *health) last() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cause
}

// now reports whether a fallback happened since Redis last answered, and
// the most recent real cause.
func (h *health) now() (falling bool, cause error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.falling, h.cause
}

// set records a real cause (a timeout is not one: it says only that
// Redis was slow, and the cause it carries is already known).
func (h *health) set(err error) {
	var te *timeoutError
	if errors.As(err, &te) {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cause = err
}

func (h *health) reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cause, h.falling, h.count = nil, false, 0
}

// fallback counts a fallback and reports whether to report it now, and
// how many it stands for.
func (h *health) fallback(now time.Time) (n int, report bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.count++
	if h.falling && now.Sub(h.reported) < fallbackEvery {
		return 0, false
	}
	n = h.count
	h.falling, h.reported, h.count = true, now, 0
	return n, true
}

// timeoutError is the failure of a call Redis did not answer within
// Limiter.Timeout. It wraps the most recent real cause, if any, and reports
// Timeout() == true.
type timeoutError struct {
	timeout time.Duration
	last    error
}

func (e *timeoutError) Error() string {
	s := fmt.Sprintf("redis did not answer within %v (Limiter.Timeout; raise it if Redis is far or busy)", e.timeout)
	if e.last != nil {
		s += "; last error: " + e.last.Error()
	}
	return s
}

func (e *timeoutError) Unwrap() error { return e.last }

// Timeout reports true: the call timed out.
func (e *timeoutError) Timeout() bool { return true }

// errCaller tells the caller's own context ending apart from a store failure.
func errCaller(ctx context.Context, err error) bool {
	return ctx.Err() != nil && errors.Is(err, ctx.Err())
}
