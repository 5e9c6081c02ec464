package throttle

import (
	"context"
	"math"
	"net/http"
	"time"

	"golang.org/x/time/rate"
)

// Feedback is what one response told the client about a quota, as
// [Transport] reads it for the quota's waiter. Durations are relative to
// when the response arrived, so no clock but the waiter's own is involved.
type Feedback struct {
	// Cost is the units the request spent; zero means 1.
	Cost int

	// Age is how long ago the request's wait for quota began: a
	// rejection of a request that reserved its turn before the waiter last
	// slowed down says nothing about the slower pace.
	Age time.Duration

	// Pause: nothing may be sent before Pause from now (Retry-After, or an
	// exhausted quota's reset). Zero means no pause.
	Pause time.Duration

	// Throttled: the server rejected the request (429 or 503) without
	// saying for how long. The waiter should slow down.
	Throttled bool

	// Window: Remaining units may be spent until Reset from now, as the
	// most restrictive policy of the counted unit says; Size units per
	// window of length Window (0 if not said). Valid if HasWindow.
	Remaining float64
	Reset     time.Duration
	Size      float64
	Window    time.Duration
	HasWindow bool

	// Declared: the pace the server declares (a policy of Limit units per
	// window, as Limit/window and Burst), for a key with no configured
	// limit. Valid if HasDeclared.
	Limit       rate.Limit
	Burst       int
	HasDeclared bool
}

// Adapter is a Waiter that paces itself from what servers say: it honours
// pauses, spreads a quota that runs low over the time left to its reset,
// adopts a server's declared limit where none is configured, and slows
// down on bare rejections. [Limiter]'s per-key waiters implement it;
// Transport prefers it to [Pauser].
type Adapter interface {
	Adapt(ctx context.Context, f Feedback) error
}

// feedback reads one response into the Feedback for its quota's waiter,
// and into the retry delay the server asked for: wait, and whether the
// server said (said is false when the backoff decides).
//
// A Retry-After is about the quota on a 429 or 503 only; on a redirect or
// a success it is advice for that response alone (RFC 9110, 10.2.3), and
// there "0" means now. A spent quota's reset is about the quota on any
// response; "quota remains" on a rejection says nothing of when to retry.
func (t *Transport) feedback(resp *http.Response, q Quota, age time.Duration) (f Feedback, wait time.Duration, said bool) {
	f.Age = age
	status := resp.StatusCode
	rejected := status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable
	wait, known := q.Wait()
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
	if rejected && f.Pause == 0 && !t.DisableAdaptive {
		f.Throttled = !known || status == http.StatusTooManyRequests
	}

	unit := t.CostUnit
	if unit == "" {
		unit = "requests"
	}
	best := math.Inf(1)
	for _, p := range q.Policies {
		if p.Unit != unit && !(p.Unit == "" && unit == "requests") {
			continue
		}
		// Windows are tracked when they are long enough for whole-second
		// resets to tell them apart: a per-second limit is a pace, which
		// the declared limit and the pauses keep. A window of unknown
		// length counts as long only when its reset is a second past
		// that more: resets read from whole-second epochs against a
		// whole-second Date are up to 2 s late, and a token bucket's
		// "time until full" is short.
		long := p.Reset >= minTrackedWindow+time.Second
		if p.Known&HasWindow != 0 {
			long = p.Window >= minTrackedWindow
		}
		if p.Known&(HasRemaining|HasReset) == HasRemaining|HasReset && p.Reset > 0 && long {
			// The most restrictive window: the least remaining per second
			// until its reset.
			if r := float64(p.Remaining) / p.Reset.Seconds(); r < best {
				best = r
				// A reset beyond MaxRetryAfter is waited for
				// MaxRetryAfter only (then a probe asks again), as a
				// Retry-After is.
				f.Remaining, f.Reset, f.HasWindow = float64(p.Remaining), min(p.Reset, t.Retry.maxRetryAfter()), true
				f.Size, f.Window = 0, 0
				if p.Known&HasLimit != 0 {
					f.Size = float64(p.Limit)
				}
				if p.Known&HasWindow != 0 {
					f.Window = p.Window
				}
			}
		}
		if !t.DisableDeclaredLimits && p.Known&(HasLimit|HasWindow) == HasLimit|HasWindow && p.Limit > 0 && p.Window > 0 {
			l := rate.Limit(float64(p.Limit) / p.Window.Seconds())
			// A declared pace slower than one unit per MaxRetryAfter
			// would make waits longer than the user allowed: ignored.
			if time.Duration(float64(time.Second)/float64(l)) > t.Retry.maxRetryAfter() {
				continue
			}
			if !f.HasDeclared || l < f.Limit {
				f.Limit, f.Burst, f.HasDeclared = l, int(min(p.Limit, math.MaxInt32)), true
			}
		}
	}
	return f, wait, said
}

// window is a key's view of the server's current quota window: Remaining
// units until the reset. It is kept locally, spent at each wait, so that
// requests in flight count before their responses arrive, and refreshed
// from each response. When the reset passes, one probe request is let
// through before the next window's size is known.
//
// Times are nanoseconds on the bucket's clock; the bucket's mutex
// protects a window.
type window struct {
	valid     bool
	remaining float64 // units left until reset
	reset     float64 // when the window resets
	limit     float64 // the window's size when known (policy limit), else 0
	spreadTat float64 // next turn when spreading
}

const (
	// minTrackedWindow: shorter windows are not tracked (see feedback).
	minTrackedWindow = 2 * time.Second
	// sameWindow: two resets closer than this are the same window (at
	// most half the window's length). Reset times come in whole seconds
	// in most dialects, and so does the Date they are measured against:
	// two readings of one reset can differ by up to 2 s.
	sameWindow = 2.5e9
	// probeWait: how long a probe after a reset may go unanswered before
	// another is let through.
	probeWait = 1e9
)

// update applies a response's window at now.
// others is the units reserved and not yet answered: a new window's
// remaining from the server does not count them yet (some it may have,
// which errs on the safe side).
func (w *window) update(now float64, f Feedback, others float64) {
	reset := now + float64(f.Reset)
	remaining := max(f.Remaining-others, 0)
	same := sameWindow
	if f.Window > 0 {
		same = min(same, float64(f.Window)/2)
	}
	if w.valid && math.Abs(reset-w.reset) < same {
		// Same window: the local count already spent the units in
		// flight, so take the server's count as it is.
		w.remaining = min(w.remaining, f.Remaining)
		w.reset = min(w.reset, reset)
	} else if !w.valid || reset > w.reset {
		w.valid, w.remaining, w.reset, w.spreadTat = true, remaining, reset, 0
	}
	w.limit = f.Size
}

// admit reports whether n units may be spent in the window at now, and
// if not, until when the window blocks them (its reset, or the end of a
// probe's wait).
func (w *window) admit(now float64, n int) (until float64, blocked bool) {
	if !w.valid {
		return 0, false
	}
	if now >= w.reset {
		// The window has reset; its new size is unknown until a response
		// says. Let one probe through (of n units: a probe must fit).
		w.remaining, w.reset = float64(n), now+probeWait
	}
	if w.remaining < float64(n) {
		return w.reset, true
	}
	return 0, false
}

// low reports whether the window's remaining units are few enough to
// spread over the time left: under a tenth of the window's size, or 10.
func (w *window) low() bool {
	if w.limit > 0 {
		return w.remaining < max(1, w.limit/10)
	}
	return w.remaining < 10
}

// spreadTurn returns the turn of a wait that would otherwise come at turn:
// when the window runs low, at most remaining/(reset-now) per second, so
// the quota lasts until the reset instead of running dry under every
// in-flight caller.
func (w *window) spreadTurn(turn float64) float64 {
	if !w.valid || !w.low() {
		return turn
	}
	return max(turn, w.spreadTat)
}

// spend takes n units at turn.
func (w *window) spend(turn float64, n int) {
	if !w.valid {
		return
	}
	w.remaining -= float64(n)
	if w.low() {
		w.spreadTat = turn + (w.reset-turn)/max(w.remaining+1, 1)
	}
}

// pace returns the bucket's interval and burst at now, with what servers
// said: a declared pace where none is configured, and the adaptive pace
// after bare rejections. It requires b.mu.
func (b *bucket) pace(now float64, n int) (interval float64, burst int) {
	interval, burst = b.interval, b.burst
	s := b.srv
	if s == nil {
		return interval, burst
	}
	if interval == 0 && s.dInterval > 0 {
		interval, burst = s.dInterval, max(s.dBurst, n)
	}
	ceiling := math.Inf(1)
	if interval > 0 {
		ceiling = 1e9 / interval
	}
	if ai := s.adapt.interval(now, ceiling); ai > interval {
		interval = ai
		burst = max(burst, n)
	}
	return interval, burst
}

// countSent counts n units sent at now, for the measured rate. It requires
// b.mu.
func (b *bucket) countSent(now float64, n int) {
	sec := int64(now / 1e9)
	switch {
	case sec == b.txSec:
	case sec == b.txSec+1:
		b.txSec, b.txPrev, b.txCur = sec, b.txCur, 0
	default:
		b.txSec, b.txPrev, b.txCur = sec, 0, 0
	}
	b.txCur += float64(n)
}

// measured returns the units the key sent over the last second (counted
// when their turns were reserved). It requires b.mu.
func (b *bucket) measured(now float64) float64 {
	b.countSent(now, 0)
	frac := now/1e9 - float64(b.txSec)
	return b.txCur + b.txPrev*(1-frac)
}

// Adapt applies what a server said about the key's quota: see [Adapter].
// It never blocks and never fails.
func (b *bucket) Adapt(ctx context.Context, f Feedback) error {
	b.mu.Lock()
	if b.dead {
		b.mu.Unlock()
		return b.l.bucket(b.key).Adapt(ctx, f)
	}
	defer b.mu.Unlock()
	now := b.l.now()
	b.pending = max(b.pending-float64(max(f.Cost, 1)), 0)
	if f.Pause == 0 && !f.HasWindow && !f.HasDeclared && !f.Throttled {
		return nil // nothing said; the request is answered
	}
	srv := b.server()
	if f.Pause > 0 {
		b.pauseLocked(now, float64(f.Pause))
	}
	if f.HasDeclared && b.interval == 0 && f.Limit > 0 && f.Limit != rate.Inf {
		srv.dInterval, srv.dBurst = 1e9/float64(f.Limit), max(f.Burst, 1)
	}
	if f.HasWindow {
		srv.win.update(now, f, b.pending)
	}
	if srv.changed != nil && (f.HasWindow || f.Pause > 0) {
		close(srv.changed)
		srv.changed = nil
	}
	if f.Throttled {
		interval, _ := b.pace(now, 1)
		ceiling := math.Inf(1)
		if interval > 0 {
			ceiling = 1e9 / interval
		}
		switch srv.adapt.reject(now, now-float64(f.Age), b.measured(now), ceiling) {
		case rejectShift:
			b.tat = max(b.tat, now) + shiftSlots*interval
		case rejectCut:
			// Stretch the queue of waits reserved at the old pace to the
			// new one, so that a cut slows them too (see sleepTurn), not
			// only the waits that come after it.
			if after, _ := b.pace(now, 1); interval > 0 && after > interval {
				b.shiftQueue(stretch{at: now, ratio: after / interval})
			}
		}
	}
	return nil
}

// stretch is what a cut or a pause does to the turns already reserved: a
// turn t after at moves to at + (t-at)·ratio + shift.
type stretch struct {
	at, ratio, shift float64
}

func (st stretch) apply(t float64) float64 {
	if t <= st.at {
		return t
	}
	return st.at + (t-st.at)*st.ratio + st.shift
}

// shiftQueue applies st to the bucket's queue: to its arrival time now,
// and to each queued wait when its turn comes (see sleepTurn). It requires
// b.mu.
func (b *bucket) shiftQueue(st stretch) {
	b.tat = st.apply(b.tat)
	s := b.server()
	s.cuts++
	s.stretches[s.cuts%uint64(len(s.stretches))] = st
}

// stretched returns where the moves since seq moved turn.
func (s *serverState) stretched(turn float64, seq uint64) float64 {
	n := uint64(len(s.stretches))
	if s.cuts-seq > n {
		seq = s.cuts - n // older moves are forgotten
	}
	for c := seq + 1; c <= s.cuts; c++ {
		turn = s.stretches[c%n].apply(turn)
	}
	return turn
}

// notePending counts n units reserved at now as awaiting feedback. A key
// idle for pendingIdle forgets what it counted, so that requests never
// answered through Adapt (sent by a caller other than Transport, or lost)
// do not count for ever. It requires b.mu.
func (b *bucket) notePending(now float64, n int) {
	if now-b.lastResv > pendingIdle {
		b.pending = 0
	}
	b.pending += float64(n)
	b.lastResv = now
}

const pendingIdle = 10e9
