package strict

import "github.com/throttle-go/throttle/internal/schedule"

// The burst's spread. A server's bucket with a burst is anchored once,
// by the first burst of a busy period: its bucket, full as the key's,
// starts counting from the first of the burst's units to arrive, the one
// with the least delay on the way. A later unit that arrives with less
// delay than it (relative to its turn) finds the server's bucket short
// when the key's pace is the server's limit exactly. The spread of the
// burst's round trips (the slowest less the quickest) tells how much the
// delays on the way vary: the key's turns move later by it, once per busy
// period, at most anchorMax of an interval.

// burstSpread is what the responses to a busy period's first burst told.
type burstSpread struct {
	seen    bool    // a response was seen: at is set
	at      float64 // the busy period it is for (the engine's BusySince)
	lo, hi  float64 // the quickest and slowest round trips of the burst
	shifted float64 // how far the key's turns moved for it
}

// spread applies, after advance, a response at now to a unit sent at
// sentAt, which took rtt there and back, for a key with a configured
// limit. It reports whether the turns moved.
func (k *Key) spread(s *schedule.State, now float64, c schedule.Config, sentAt, rtt float64) bool {
	iv := interval(s, now, c)
	busy := s.BusySince()
	if c.Interval == 0 || iv <= 0 || sentAt < busy || sentAt-busy >= iv {
		return false // not a unit of the busy period's first burst
	}
	b := &k.burst
	if !b.seen || b.at != busy {
		*b = burstSpread{seen: true, at: busy, lo: rtt, hi: rtt}
	}
	b.lo, b.hi = min(b.lo, rtt), max(b.hi, rtt)
	want := min(b.hi-b.lo, AnchorMax*iv)
	if want <= b.shifted {
		return false
	}
	s.Delay(max(s.Tat(), now) + want - b.shifted)
	b.shifted = want
	return true
}
