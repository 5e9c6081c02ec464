// Package strict holds the in-process Limiter's rules for strict servers:
// servers that leave no slack (nginx's limit_req without burst, a leaky
// bucket), which refuse a request that arrives a little early although it
// was sent on time. What they decide is per Limiter key and per process:
// a key's turns move later (never earlier) by what its own responses'
// round trips and its own wake-ups tell. A fleet sharing a
// distributed.Limiter does not keep them: its keys' pace is the shared
// engine's alone.
//
// The rules:
//   - the anchor (anchor.go): once a key one unit deep is refused, each
//     response moves its next turn to an interval past when the server may
//     have taken the request;
//   - the burst's spread (spread.go): the first burst of a busy period
//     moves the key's turns later by the spread of its round trips;
//   - timing refusals (timing.go): a refusal the anchor explains leaves the
//     pace as it is;
//   - wake-ups (wake.go): how late a key's waits wake and its timers fire,
//     which the anchor discounts and a wait spins through.
//
// Every rule only moves turns later, so the engine's bounds (never over,
// FIFO, exact refunds) hold; the most any rule adds is anchorMax of an
// interval, unless a server showed it needs more (anchorWide).
package strict

import "github.com/throttle-go/throttle/internal/schedule"

// Key is what the strict-server rules keep of one key. The zero Key is a
// key that has seen nothing. It is not safe for concurrent use: the
// Limiter holds the key's lock.
type Key struct {
	quick    float64     // the quickest round trip of the key's responses; 0: none
	burst    burstSpread // the round trips of the busy period's first burst
	okSince  float64     // units answered without a refusal since the key's last one
	jitterAt float64     // when a refusal last left the pace as it was; 0: never
	bound    anchorBound // the most delay a response adds
	wake     wakeLag     // how late the key's waits wake after their turns
	late     timerLate   // how late the key's timers fire
	// rejected: when the key was last rejected (the engine's Rejected as
	// last seen, or a refusal that anchored it), if ever. The rules keep
	// their own memory of it: the engine forgets a rejection once its
	// consequences are over, the anchor holds for TrimKeep.
	rejected    float64
	hasRejected bool
}

// Saw records, after an op on s, the key's last rejection as the engine
// keeps it.
func (k *Key) Saw(s *schedule.State) {
	if at, ok := s.Rejected(); ok && (!k.hasRejected || at > k.rejected) {
		k.rejected, k.hasRejected = at, true
	}
}

// RoundTrip counts a response's round trip, age (any response).
func (k *Key) RoundTrip(age float64) {
	if age > 0 && (k.quick == 0 || age < k.quick) {
		k.quick = age
	}
}

// Took applies, after the engine's Advance, a response at now to a
// request sent age ago that the server took with no pause: the anchor and
// the burst's spread may move the key's turns later. It reports whether
// they moved.
func (k *Key) Took(s *schedule.State, now float64, c schedule.Config, age float64) bool {
	if age <= 0 {
		return false
	}
	a := k.anchor(s, now, c, now-age)
	b := k.spread(s, now, c, now-age, age)
	return a || b
}

// Answered counts n units answered without a refusal.
func (k *Key) Answered(n float64) {
	k.okSince += n
	k.bound.answered(n)
}

// Refused counts a refusal that is not the strict server's timing.
func (k *Key) Refused() { k.okSince = 0 }

// interval returns the key's pace at now.
func interval(s *schedule.State, now float64, c schedule.Config) float64 {
	iv, _ := s.Pace(now, c)
	return iv
}

// anchored reports whether the key is anchored at now: a configured limit
// one unit deep, whose server refused it lately.
func (k *Key) anchored(s *schedule.State, now float64, c schedule.Config) bool {
	iv, tau := s.Pace(now, c)
	return c.Interval > 0 && iv > 0 && tau <= iv*(1+1e-9) && k.hasRejected && now-k.rejected <= schedule.TrimKeep*c.Sec
}
