package throttle

import (
	"context"
	"math"
	"net/http"
	"time"

	"github.com/throttle-go/throttle/internal/learn"
	"github.com/throttle-go/throttle/ratelimit"
	"golang.org/x/time/rate"
)

// This file is where the Transport reads a response's headers (observe): package
// ratelimit parses them (every dialect), and feedback turns the reading
// into what the key's waiter and the retry decision take.

// feedback reads one response into the Feedback for its quota's waiter,
// and into the retry delay the server asked for: wait, and whether the
// server said (said is false when the backoff decides).
//
// A Retry-After is about the quota on a 429 or 503 only; on a redirect or
// a success it is advice for that response alone (RFC 9110, 10.2.3), and
// there "0" means now. A spent quota's reset is about the quota on any
// response; "quota remains" on a rejection says nothing of when to retry.
//
// paced says whether the key's waiter follows a declared pace (see
// followsDeclared): then a spent window too short to track pauses
// nothing (f.Paced).
func (t *Transport) feedback(resp *http.Response, q ratelimit.Reading, age time.Duration, paced bool) (f Feedback, wait time.Duration, said bool) {
	f.Age = age
	status := resp.StatusCode
	rejected := status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable
	wait, known := q.Wait()
	if paced && !rejected && !q.HasRetryAfter && wait > 0 && !t.DisableDeclaredLimits {
		// Spent windows too short to track are a pace (see below); the
		// wait is the other policies' if any, and f.Paced says so.
		if w, k, short := paceWindows(q, t.unit()); short {
			wait, known, f.Paced = w, k, true
		}
	}
	switch {
	case !known:
	case q.HasRetryAfter:
		said = rejected
	default:
		said = wait > 0
	}
	if !said {
		wait = 0
	}
	if wait > 0 {
		f.Pause = min(wait, t.Retry.maxRetryAfter())
	}
	if rejected && !t.DisableAdaptive {
		f.Verdict = Refused
		if f.Pause == 0 && (!known || status == http.StatusTooManyRequests) {
			f.Verdict = RefusedBare
		}
	}

	unit := t.unit()
	best := math.Inf(1)
	for _, p := range q.Policies {
		if !learn.SameUnit(p.Unit, unit) {
			continue
		}
		// Windows are tracked when they are long enough for whole-second
		// resets to tell them apart: a per-second limit is a pace, which
		// the declared limit and the pauses keep. A window of unknown
		// length counts as long only when its reset is a second past
		// that more: resets read from whole-second epochs against a
		// whole-second Date are up to 2 s late, and a token bucket's
		// "time until full" is short.
		//
		// A bucket that refills continuously (OpenAI, Groq, Anthropic:
		// [ratelimit.Policy].Refills) is no window: its reset is the time
		// until it is full, and its units free one every Window/Limit
		// long before. It paces the key by its declared rate (below), and
		// a spent one pauses the key one unit's refill time (the wait
		// above, from Reading.Wait).
		long := p.Reset >= learn.MinTrackedWindow+time.Second
		if p.HasWindow {
			long = p.Window >= learn.MinTrackedWindow
		}
		tracked := p.HasRemaining && p.HasReset && p.Reset > 0 && long && !p.Refills
		if tracked {
			// The most restrictive window: the least remaining per second
			// until its reset.
			if r := float64(p.Remaining) / p.Reset.Seconds(); r < best {
				best = r
				// The window is spread over the time to its reset,
				// however long (GitHub's hour): MaxRetryAfter caps one
				// retry's delay and a pause, not the pacing of a window.
				w := &ServerWindow{Remaining: float64(p.Remaining), Reset: p.Reset}
				if p.HasLimit {
					w.Size = float64(p.Limit)
				}
				if p.HasWindow {
					w.Length = p.Window
				}
				f.Window = w
			}
		}
		// What remains of a policy not tracked as a window caps the
		// key's bucket: a refilling bucket's level, a short window's
		// count (the engine's Level). A tracked window counts its units
		// in flight itself (the engine's window), against the window,
		// not the bucket: capped as well, the units its responses were
		// counted in would be taken off twice.
		if p.HasRemaining && !tracked && (f.Available == nil || float64(p.Remaining) < *f.Available) {
			a := float64(p.Remaining)
			f.Available = &a
		}
		if !t.DisableDeclaredLimits && p.HasLimit && p.HasWindow && p.Limit > 0 && p.Window > 0 {
			l := rate.Limit(float64(p.Limit) / p.Window.Seconds())
			// A declared pace slower than one unit per MaxRetryAfter
			// would make waits longer than the user allowed: ignored.
			if time.Duration(float64(time.Second)/float64(l)) > t.Retry.maxRetryAfter() {
				continue
			}
			if f.Declared == nil || l < f.Declared.Rate {
				// A bucket deeper than its limit (Depth) declares its depth.
				burst := int(min(max(p.Limit, p.Depth), math.MaxInt32))
				if p.Window < learn.MinTrackedWindow && !p.Refills {
					// A window too short to track is a pace: its units
					// spread evenly fill every window exactly, where a
					// burst at the window's start spends it and must wait
					// for a reset known to a whole second at best.
					burst = 1
				}
				f.Declared = &Declared{Rate: l, Burst: burst}
			}
		}
	}
	return f, wait, said
}

// paceWindows returns q's wait without its spent windows that are too
// short to track (under learn.MinTrackedWindow, of the counted unit, declaring
// their pace: see feedback), and whether there were such: a waiter that
// follows the declared pace needs no pause to their reset, which a
// whole-second t puts up to a second late (the declared pace, and what
// remains capping the bucket, hold the key). ok is false when nothing
// else tells a wait.
func paceWindows(q ratelimit.Reading, unit string) (wait time.Duration, ok, short bool) {
	rest := q
	rest.Policies = nil
	for _, p := range q.Policies {
		if p.Exhausted() && learn.SameUnit(p.Unit, unit) && !p.Refills && p.HasLimit && p.Limit > 0 && p.HasWindow && p.Window > 0 && p.Window < learn.MinTrackedWindow {
			short = true
			continue
		}
		rest.Policies = append(rest.Policies, p)
	}
	if !short {
		return 0, false, false
	}
	wait, ok = rest.Wait()
	return wait, ok, true
}

// followsDeclared reports whether q is a Limiter's key with no pace
// configured, which a server's declared limit paces: also the
// Transport's own key when it has no Waiter.
func followsDeclared(q Quota) bool {
	if c, ok := q.(chain); ok && c.w == nil {
		q = c.Quota
	}
	k, ok := q.(*limiterKey)
	return ok && !k.k().Configured()
}

// unit returns the unit Cost counts: CostUnit, "requests" when unset.
func (t *Transport) unit() string {
	if t.CostUnit == "" {
		return "requests"
	}
	return t.CostUnit
}

// observe reads resp's rate-limit headers into o, classifies o, and tells
// the key's quota what the headers and the decision say: a pause when the
// quota is spent, the quota's window, the server's declared limit, a bare
// refusal. It returns the decision, whether a bare refusal slowed the
// quota down, and whether the quota took it for a strict server's timing,
// which leaves its pace as it was (internal/strict).
func (t *Transport) observe(ctx context.Context, o *Outcome, q Quota, key string, n int, sent, now time.Time) (d Decision, slowed, timing bool) {
	resp := o.Response
	o.Reading = ratelimit.Parse(resp.Header, now)
	// The limits in other units than the cost's, read in its unit where
	// the key's responses told what a request costs in them.
	rejected := resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable
	r := t.learned.Read(key, o.Reading, t.unit(), n, rejected, now)
	f, wait, said := t.feedback(resp, r, now.Sub(sent), followsDeclared(q))
	f.Spent = n
	status := resp.StatusCode
	switch {
	case (status == http.StatusForbidden || status == http.StatusTooManyRequests) && !said &&
		learn.IsSecondary(keepRead(ctx, resp)):
		// A secondary limit (GitHub's): its Retry-After where it sends
		// one; else a minute's pause, doubled while they come in a row
		// (internal/learn).
		if ra, ok := o.Reading.Wait(); ok && o.Reading.HasRetryAfter {
			wait = min(max(ra, 0), t.Retry.maxRetryAfter())
		} else {
			wait = min(t.learned.Secondary(key, now), t.Retry.maxRetryAfter())
		}
		said = true
		f.Verdict, f.Pause = Refused, wait
	case !rejected:
		f.Verdict = Accepted
		t.learned.Accepted(key)
	}
	o.Wait, o.HasWait = wait, said
	d = t.Retry.classify(*o)
	f.Pause = max(f.Pause, min(d.Pause, t.Retry.maxRetryAfter()))
	if f.Verdict == RefusedBare && o.Reading.Permanent() {
		f.Verdict = Refused // a permanent rejection: a slower pace cannot help
	}
	// The quota tells a refusal of timing, and a pause it ended early (a
	// learned budget's refused probe).
	if a, err := q.Observe(ctx, f); err != nil {
		f.Pause = 0
	} else {
		f.Pause, timing = a.Pause, a.Timing
		slowed = f.Verdict == RefusedBare && !timing
	}
	if f.Pause > 0 {
		t.emit(Event{Kind: EventPause, Request: o.Request, Key: key, Attempt: o.Attempt, Delay: f.Pause, StatusCode: resp.StatusCode})
	}
	return d, slowed, timing
}
