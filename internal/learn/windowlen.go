package learn

import (
	"time"

	"github.com/throttle-go/throttle/ratelimit"
)

// Many servers state a limit and when it resets but not over how long
// (X-RateLimit-Limit, -Remaining, -Reset: go-chi/httprate, Envoy, most
// gateways): without the window, the limit declares no pace, and a
// client told nothing runs unpaced into it, pausing at each refusal.
//
// The resets tell the window. A window's reset is never further than the
// window's length, and is that far at its start (resets in whole seconds
// are rounded up, as the IETF draft's t and an epoch end measured against
// a whole-second Date are): the longest reset a policy gave is its window
// once the responses span at least that long (so that a window start was
// seen, whatever the phase of the first). A rolling window ("reset" the
// time until the oldest unit counted leaves) gives its length at every
// response, and is the same limit. The window is rounded up to whole
// seconds. A window told this way declares its pace (Limit per window,
// see Transport.DisableDeclaredLimits) as a stated one does. Only windows
// too short to track are told (MinTrackedWindow): a longer one paces the
// key by what remains until its reset, and a length read a rounding too
// long would slow it.
//
// A short window is told from the first response, before the responses
// span it, while it is not spent: the longest reset so far is the window
// until a longer one shows, so that a key told nothing is paced from its
// first window, not only once it has spanned one. A window shorter than
// told (a minute seen in its last second) paces the key faster than its
// limit only until the next window's first response shows a longer
// reset, which withdraws it (no shorter window is then told); what
// remains of the window caps the key meanwhile. A spent window not yet
// spanned is not told: its reset is what the key waits for, exactly,
// where a pace from a guessed length would hold it longer.

// unwindowed reports whether p states a limit and a reset but no window:
// one whose window its resets may tell. A refilling bucket's reset is the
// time until it is full, which tells nothing of its window, unless it is
// one deeper than its limit (Depth): then its limit is what it refills
// in the time its resets show.
func unwindowed(p ratelimit.Policy) bool {
	return !p.HasWindow && (!p.Refills || p.Depth > 0) && p.HasLimit && p.HasReset && p.Reset > 0
}

// seeReset takes p's reset, given by a response at now.
func (s *policySeen) seeReset(p ratelimit.Policy, now time.Time) {
	if s.first.IsZero() {
		s.first = now
	}
	s.resetMax = max(s.resetMax, p.Reset)
}

// window returns the window the resets told (the longest so far; if the
// response at now says the window is spent, only once the responses span
// it), if it is too short to track (MinTrackedWindow: longer windows pace
// the key by what remains until their reset, which a declared pace from
// a window read a rounding too long would only slow).
func (s *policySeen) window(now time.Time, spent bool) (time.Duration, bool) {
	if s.first.IsZero() || s.resetMax <= 0 || (spent && now.Sub(s.first) < s.resetMax) {
		return 0, false
	}
	w := (s.resetMax + time.Second - 1).Truncate(time.Second)
	if w >= MinTrackedWindow {
		return 0, false
	}
	return w, true
}

// MinTrackedWindow: shorter windows are not tracked: a window shorter
// than this declares a pace instead.
const MinTrackedWindow = 2 * time.Second
