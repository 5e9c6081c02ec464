package strict

import "github.com/throttle-go/throttle/internal/schedule"

// Timing refusals. Once a key is anchored, what refuses a request is the
// timing of that request and the one before it, not the server's budget:
// the one before arrived later than its round trip told, or the process
// stalled and units whose turns had passed went at once. A bare
// refusal's shift and trim (the engine's Reject) would cost two more
// intervals' worth and a slow-down each, though the pace is right. So
// these refusals leave the pace as it is:
//
//   - a refusal the widened anchor explains (anchor.go);
//   - the first bare refusal of a key one unit deep under a configured
//     limit, which anchors it: it shows the server strict, and the anchor
//     is the remedy for the timing that refused it;
//   - on an anchored key with no cut in force, a refusal after at least
//     1/TrimTarget − 1 units answered without one (refusals rarer than
//     the trim's own target), and a refusal of a request that was in
//     flight when such a refusal came.
//
// A server whose budget is below the one told refuses far more often than
// that: its refusals shift, trim and then cut, as on any key.

// Timing applies, after advance, a bare refusal at now of a request sent
// at sentAt: it reports whether it was the strict server's timing, which
// leaves the pace as it is. If not, the caller applies the engine's
// Reject (and Refused).
func (k *Key) Timing(s *schedule.State, now float64, c schedule.Config, sentAt float64) bool {
	switch {
	case k.anchored(s, now, c) && k.bound.widen(sentAt, interval(s, now, c)):
		k.okSince = 0
	case k.start(s, now, c), k.jitter(s, now, c, sentAt):
		k.okSince, k.jitterAt = 0, now
	default:
		return false
	}
	return true
}

// start applies, on a key that is not anchored, a bare refusal at now:
// it reports whether the refusal anchored the key.
func (k *Key) start(s *schedule.State, now float64, c schedule.Config) bool {
	iv, tau := s.Pace(now, c)
	if c.Interval <= 0 || iv <= 0 || tau > iv*(1+1e-9) || k.anchored(s, now, c) || s.CutRate(now, c) > 0 || s.Trim() > 0 {
		return false
	}
	s.MarkRejected(now)
	k.rejected, k.hasRejected = now, true
	return true
}

// jitter reports whether a bare refusal at now of a request sent at
// sentAt is one of the strict server's timing on an anchored key.
func (k *Key) jitter(s *schedule.State, now float64, c schedule.Config, sentAt float64) bool {
	last := k.rejected
	return k.anchored(s, now, c) && s.CutRate(now, c) == 0 &&
		(k.okSince >= (1-schedule.TrimTarget)/schedule.TrimTarget || (k.jitterAt > 0 && k.jitterAt >= last && sentAt < k.jitterAt))
}
