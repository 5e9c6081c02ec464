package throttle

import (
	"context"
	"errors"
	"time"
)

// The wait for quota before each attempt of a Transport's request.

// wait takes n units under a's in-flight cap (if a is not nil), then
// waits for n units of w's quota before an attempt, from start (now, or
// as good as: the caller's clock reading), and reports a wait that
// blocked; end is when it ended, for the attempt's send time. A turn later than the retries' bound (MaxElapsed for a
// retry, ctx's deadline less a round trip) is refused at once, nothing
// reserved, with a [DeadlineError] and the reason of the bound; the
// acquisition is bounded likewise. It returns the release of the
// in-flight units; if it fails, nothing is held. In a dry run it asks
// for the units without waiting, and reports what the wait would have
// been; it takes nothing under the cap.
func (t *Transport) wait(ctx context.Context, rs *retries, w Waiter, a Acquirer, key string, n, attempt int, start time.Time) (release func(), end time.Time, reason string, err error) {
	release = noRelease
	if t.DryRun {
		var units []UnitCost
		if t.Units != nil {
			units = t.Units(rs.req)
		}
		d, err := probe(ctx, w, n, units)
		if ctx.Err() != nil {
			return release, end, "", ctx.Err()
		}
		if d > 0 || err != nil {
			t.emit(Event{Kind: EventWouldWait, Request: rs.req, Key: key, Attempt: attempt, Delay: d, Err: err})
		}
		return release, time.Now(), "", nil
	}
	bound, reason := rs.bound(attempt, start)
	if !bound.IsZero() && !start.Before(bound) {
		return release, end, reason, &DeadlineError{Key: key} // no time left even for a turn now
	}
	wctx := ctx
	if dl, _ := ctx.Deadline(); !bound.IsZero() && !bound.Equal(dl) {
		var cancel context.CancelFunc
		wctx, cancel = context.WithDeadline(ctx, bound)
		defer cancel()
	}
	// The cap first, then the turn: a turn taken before the slot would
	// be spent while the request waits for the slot, sending nothing.
	// A slot held while its turn comes only delays the requests behind
	// it, and the cap is never passed.
	if a != nil {
		release, err = a.AcquireN(wctx, n)
		if err != nil {
			release = noRelease
		}
		defer func() {
			if p := recover(); p != nil {
				release() // a hook panicked: the caller never gets it
				panic(p)
			}
		}()
	}
	var units []UnitCost
	rs.units = nil
	if t.Units != nil {
		units = t.Units(rs.req)
	}
	cw, costs := w.(CostWaiter)
	if err == nil && costs && len(units) > 0 {
		// Every limit at once; a retry keeps its place as below.
		err = cw.WaitCost(wctx, Cost{N: n, Units: units, Retry: attempt > 1})
		rs.units = units
	} else if err == nil {
		if rw, ok := w.(RetryWaiter); ok && attempt > 1 {
			// A retry keeps its place ahead of the requests that arrived
			// since its first attempt.
			err = rw.WaitRetryN(wctx, n)
		} else {
			err = w.WaitN(wctx, n)
		}
	}
	end = time.Now()
	if err == nil && !bound.IsZero() && end.After(bound) {
		err = &DeadlineError{Key: key, Delay: end.Sub(start)} // a waiter that slept past the bound
	}
	if err == nil && t.tooLateToSend(ctx, end) {
		// A wait that began before a round trip was measured (requests
		// that arrived together) or when round trips were faster: its
		// turn came with less time left than a round trip now takes. Its
		// units are spent, as a request sent to time out would have
		// spent them, but nothing is sent.
		err, reason = &DeadlineError{Key: key, Delay: end.Sub(start)}, reasonDeadline
	}
	if err != nil {
		release() // all or none: a failed wait holds no slot either
		release = noRelease
		if ctx.Err() == nil && (wctx.Err() != nil || errors.Is(err, context.DeadlineExceeded)) {
			if !errors.Is(err, ErrWouldExceedDeadline) {
				err = &DeadlineError{Key: key}
			}
			return release, end, reason, err
		}
		return release, end, "", err
	}
	if t.OnEvent != nil {
		if d := end.Sub(start); d >= minReportedWait {
			t.emit(Event{Kind: EventWait, Request: rs.req, Key: key, Attempt: attempt, Delay: d})
		}
	}
	return release, end, "", nil
}

// tooLateToSend reports whether an attempt sent at now would leave less
// time before ctx's deadline than the fastest recent round trip took.
func (t *Transport) tooLateToSend(ctx context.Context, now time.Time) bool {
	dl, ok := ctx.Deadline()
	if !ok {
		return false
	}
	est := t.rtt.estimate(now)
	return est > 0 && !now.Before(dl.Add(-est))
}

// noRelease is the release of an acquisition that holds nothing.
func noRelease() {}
