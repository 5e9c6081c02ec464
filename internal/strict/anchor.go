package strict

import "github.com/throttle-go/throttle/internal/schedule"

// The anchor. A strict server takes a request only an interval after the
// last one it took, as it saw them arrive; dispatch jitter moves the
// arrivals, so a request that arrives late shortens the gap to the next
// one, which the server refuses although both were sent an interval
// apart.
//
// A response tells how late its request may have been: its round trip
// less the key's quickest, the delay added on the way in. So once a key
// configured one unit deep has been refused (its server shown to be
// strict), each response to a request that went moves the key's next
// turn to no sooner than an interval past when the server may have taken
// it: sent + interval + (round trip − quickest), less the lateness the
// key's own wake-ups exceed 19 times in 20 (wake.go: the next request is
// late too). The delay is at most anchorMax of an interval, so that a
// server whose round trips vary for other reasons costs a key no more
// than that.
//
// The bound widens where the server shows that the delays past it were
// on the way in: a refusal of the request after one whose round trip was
// past the quickest by more than the bound (sent after it, before an
// interval past its response) doubles the key's bound, up to anchorWide
// of an interval, and leaves the pace as it is. The bound halves back
// after anchorKeep units answered with no such refusal.

const (
	// AnchorMax bounds the delay a response adds, in intervals (the most
	// the engine's trim takes), unless the server showed it needs more.
	AnchorMax = schedule.TrimMax
	// AnchorWide: the widest bound, in intervals.
	AnchorWide = 0.5
	// AnchorKeep: units answered with no widening refusal before the
	// bound halves back.
	AnchorKeep = 500
)

// anchorBound is a key's bound on the delay a response adds, in
// intervals; 0 means anchorMax.
type anchorBound struct {
	wide  float64
	since float64 // units answered since it last widened
	over  overrun // the last response past it
}

// overrun is a response whose round trip was past the key's quickest by
// more than the bound: its request was sent at sent, answered at at (0:
// none).
type overrun struct{ sent, at float64 }

func (a *anchorBound) max() float64 { return max(a.wide, AnchorMax) }

// answered counts n units answered without a refusal.
func (a *anchorBound) answered(n float64) {
	a.since += n
	if a.wide > AnchorMax && a.since >= AnchorKeep {
		a.wide, a.since = max(a.wide/2, AnchorMax), 0
	}
}

// widen applies, on an anchored key paced at interval, a refusal of a
// request sent at sentAt: it reports whether the bound widened.
func (a *anchorBound) widen(sentAt, interval float64) bool {
	o := a.over
	if o.at == 0 || sentAt <= o.sent || sentAt > o.at+interval || a.max() >= AnchorWide {
		return false
	}
	a.wide, a.since, a.over = min(2*a.max(), AnchorWide), 0, overrun{}
	return true
}

// anchor applies, after advance, a response at now to a request sent at
// sentAt that the server took: it reports whether the next turn moved.
func (k *Key) anchor(s *schedule.State, now float64, c schedule.Config, sentAt float64) bool {
	if !k.anchored(s, now, c) {
		return false
	}
	iv := interval(s, now, c)
	excess, bound := max(now-sentAt-k.quick, 0), k.bound.max()*iv
	if excess > bound {
		k.bound.over = overrun{sent: sentAt, at: now}
	}
	lag := float64(k.wake)
	return s.Delay(sentAt + iv + min(excess, bound) - min(max(lag, 0), AnchorMax*iv))
}
