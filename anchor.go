package throttle

import "math"

// A strict server (nginx's limit_req without burst, a leaky bucket with
// no slack) takes a request only an interval after the last one it took,
// as it saw them arrive. Dispatch jitter moves the arrivals: a request
// that arrives late shortens the gap to the next one, which the server
// refuses although both were sent an interval apart (a leaky bucket of
// 50/s, up to 1 ms of jitter on the way in, a Transport told 50/s: 1% of
// the requests refused with the trim's margin, 0.94 of the capacity).
//
// A response tells how late its request may have been: its round trip
// less the key's quickest (the least a request takes there and back), the
// delay added on the way. So once a key configured one unit deep (a
// limit on the gap between requests; a window a server declares counts
// units per window, where gaps do not matter) has been refused
// (its server shown to be strict), each response to a request that went
// moves the key's next turn to no sooner than an interval past when the
// server may have taken it: sent + interval + (round trip − quickest).
// The gap the server sees is then never short by the jitter of the
// request before (it may still be by the next one's, the trim's margin).
// The delay is at most anchorMax of an interval, so that a server whose
// round trips vary for other reasons (time spent answering after the
// limit was checked) costs a key no more than that. It only moves turns
// later, so the bucket's bound holds; it is kept by the in-process
// Limiter, as level is.

// anchorMax bounds the delay a response adds, in intervals (trimMax: the
// most the trim takes), unless the server showed it needs more (below).
const anchorMax = trimMax

// The bound widens where the server shows that the delays past it were
// on the way in. A machine has phases when round trips on loopback jump
// (one in ten took 4 to 8 ms, against 0.4 in the median, on the idle
// 2-core machine, for seconds at a time); a request delayed that long on
// the way in arrives that much closer to the next one, which a strict
// server refuses: 7 to 11 refusals in 300 requests, each cutting the pace
// a further 1%, 0.81 to 0.87 of the capacity against 0.97 outside such
// phases. So a refusal of the request after one whose round trip was
// past the quickest by more than the bound (sent after it, before an
// interval past its response) doubles the key's bound, up to anchorWide
// of an interval, and leaves the pace as it is: the anchor now covers
// such delays. A server whose round trips vary for other reasons (time
// spent answering after its limit was checked) refuses no request for
// them, and its keys keep anchorMax. The bound halves back after
// anchorKeep units answered with no such refusal.
const (
	anchorWide = 0.5
	anchorKeep = 500
)

// anchorBound is a key's bound on the delay a response adds, in
// intervals (see above); 0 means anchorMax.
type anchorBound struct {
	wide  float64
	since float64 // units answered since it last widened
	over  overrun // the last response past it
}

// overrun is a response whose round trip was past the key's quickest by
// more than the bound: its request was sent at sent, answered at at (0:
// none).
type overrun struct{ sent, at float64 }

func (a *anchorBound) max() float64 { return max(a.wide, anchorMax) }

// answered counts n units answered without a refusal.
func (a *anchorBound) answered(n float64) {
	a.since += n
	if a.wide > anchorMax && a.since >= anchorKeep {
		a.wide, a.since = max(a.wide/2, anchorMax), 0
	}
}

// widen applies, on an anchored key paced at interval, a refusal of a
// request sent at sentAt: it reports whether the bound widened (see
// above).
func (a *anchorBound) widen(sentAt, interval float64) bool {
	o := a.over
	if o.at == 0 || sentAt <= o.sent || sentAt > o.at+interval || a.max() >= anchorWide {
		return false
	}
	a.wide, a.since, a.over = min(2*a.max(), anchorWide), 0, overrun{}
	return true
}

// interval returns the key's pace at now, the time between units.
func (s *schedule) interval(now float64, c pacing) float64 {
	iv, _ := s.pace(now, c)
	return iv
}

// anchor applies, after advance, a response at now to a request sent at
// sentAt that the server took, for a key whose quickest round trip is
// quick, whose wake-ups are at least lag late (see wakeLag) and whose
// bound is b: see above. It reports whether the next turn moved.
func (s *schedule) anchor(now float64, c pacing, sentAt, quick, lag float64, b *anchorBound) bool {
	if !s.anchored(now, c) {
		return false
	}
	interval, _ := s.pace(now, c)
	excess, bound := max(now-sentAt-quick, 0), b.max()*interval
	if excess > bound {
		b.over = overrun{sent: sentAt, at: now}
	}
	t := sentAt + interval + min(excess, bound) - min(max(lag, 0), anchorMax*interval)
	if t <= s.tat {
		return false
	}
	s.tat = t
	return true
}

// Once a key is anchored, what refuses a request is the timing of that
// request and the one before it, not the server's budget: the one before
// arrived later than its round trip told (its delay past anchorMax, or
// its response came after the next turn), or the process stalled and
// units whose turns had passed went at once. Each such refusal costs its
// own unit; a bare refusal's shift and trim (see reject) cost two more
// intervals' worth and a slow-down event each, though the pace is right
// (a leaky bucket of 50/s on the real clock, 300 requests, 2-core machine
// at load 4 to 6: 0 to 3 such refusals a run besides the first, 11 in a
// run with stalls). So while the key is anchored, with no cut in force,
// a bare refusal after at least 1/trimTarget − 1 units answered without
// one (refusals rarer than trimTarget: the margin's own target) leaves
// the pace as it is, and so does a refusal of a request that was in
// flight when such a refusal came (units a stall let go together: a
// 55 ms stall, three units at once, two refused). A server whose budget
// is below the one told refuses far more often than that: its refusals
// shift, trim and then cut, as on any key.

// jitter reports whether a bare refusal at now of a request sent at
// sentAt, after okSince units were answered since the key's last refusal,
// is one of the strict server's timing on an anchored key (see above),
// which leaves the pace as it is; last is when the last such refusal
// came, or the key was anchored by one (anchorStart; 0 for none).
func (s *schedule) jitter(now float64, c pacing, okSince, sentAt, last float64) bool {
	return s.anchored(now, c) && s.cut.rate(now, c.sec) == 0 &&
		(okSince >= (1-trimTarget)/trimTarget || (last > 0 && last >= s.cut.last && sentAt < last))
}

// The first bare refusal of a key one unit deep under a configured limit
// is what anchors it: it shows the server strict, and the anchor is the
// remedy for the timing that refused it (the request before arrived late,
// which its round trip now tells). So it too leaves the pace as it is,
// and its retry takes the key's next paced turn, where a bare refusal's
// shift and trim (see reject) cost about an interval each: the shift
// once, the 1% trim over the hundred units that give it back (a leaky
// bucket of 50/s on the real clock, 300 requests: 40 ms of the run's
// 6.2 s, two thirds of the 0.03 of its capacity the goal leaves). So do the refusals of requests that were in
// flight when it came (jitter). A server whose budget is below the limit
// told refuses again before 1/trimTarget − 1 units are answered, and that
// refusal shifts and trims, then cuts, as on any key: such a key pays one
// refusal more. A key refused lately, or cut or trimmed, is not anchored
// this way: its refusals are reject's.

// anchorStart applies, on a key that is not anchored, a bare refusal at
// now: it reports whether the refusal anchored the key (see above), which
// leaves the pace as it is.
func (s *schedule) anchorStart(now float64, c pacing) bool {
	interval, tau := s.pace(now, c)
	if c.interval <= 0 || interval <= 0 || tau > interval*(1+1e-9) || s.anchored(now, c) || s.cut.rate(now, c.sec) > 0 || s.trim > 0 {
		return false
	}
	s.cut.last, s.cut.moved = now, true
	return true
}

// anchored reports whether the key is anchored at now: a configured
// limit one unit deep, whose server refused it lately (see above).
func (s *schedule) anchored(now float64, c pacing) bool {
	interval, tau := s.pace(now, c)
	return c.interval > 0 && interval > 0 && tau <= interval*(1+1e-9) && s.cut.moved && now-s.cut.last <= trimKeep*c.sec
}

// The next request is late too: its wait wakes after its turn (Go's
// netpoller waits in whole milliseconds on Linux, so a timer wakes up to
// a millisecond late, and a busy machine adds its scheduling: 0.4 to
// 0.8 ms in the median, 0.1 to 0.3 ms or more 19 times in 20, on a
// 2-core machine at load 4), and the anchor counts the lateness of the
// request before in full. So the next turn comes sooner by the lateness
// that a key's wake-ups exceed 19 times in 20 (wakeShare), as observed
// (the spread between a wait's turn and its wake-up, wakeLag), at most
// anchorMax of an interval; it still only moves turns later. The server
// still sees the gap whole unless the next wake-up is among the
// quickest, and then short by less than that. The estimate moves by
// wakeStep of an interval a wake-up, so that it follows the machine's
// load; a bubble's fake clock wakes waits on time, and the anchor is then
// as above.
const (
	wakeShare = 0.05
	wakeStep  = 0.005
)

// wakeLag is a key's estimate of the wake-up lateness its waits exceed
// but wakeShare of the time (a quantile, estimated by stochastic
// approximation: it moves down by wakeStep·(1 − wakeShare) of an
// interval for a wake-up no later than it, up by wakeStep·wakeShare
// otherwise, and rests where wakeShare of the wake-ups are quicker).
type wakeLag float64

// observe counts a wait that woke d after its turn, on a key paced at
// interval (sec: the schedule's units in a second). A nanosecond late is
// on time: a wait sleeps until its turn rounded up to the nanosecond.
func (w *wakeLag) observe(d, interval, sec float64) {
	if interval <= 0 || math.IsInf(interval, 0) || d < 0 {
		return
	}
	step := wakeStep * interval
	if d <= float64(*w)+1e-9*sec {
		*w = wakeLag(max(float64(*w)-step*(1-wakeShare), 0))
	} else {
		*w = wakeLag(min(float64(*w)+step*wakeShare, anchorMax*interval))
	}
}

// A server's bucket with a burst is anchored the same way, once, by the
// first burst of a busy period: its bucket, full as the key's, starts
// counting from the first of the burst's units to arrive, the one with
// the least delay on the way. A later unit that arrives with less delay
// than it (relative to its turn) finds the server's bucket short, when
// the key's pace is the server's limit exactly (a bucket of 100/s, burst
// 10, told exactly, ≤ 1 ms of jitter: the first such unit refused, and
// its Retry-After, a whole second, cost 0.04 of the run's capacity).
// The spread of the burst's round trips (the slowest less the quickest)
// tells how much the delays on the way vary: the key's turns move later
// by it, once per busy period, at most anchorMax of an interval. A
// server with slack loses that much once; one with none keeps, from
// then on, the slack its first arrival took.

// burstSpread is what the responses to a busy period's first burst told.
type burstSpread struct {
	seen    bool    // a response was seen: at is set
	at      float64 // the busy period it is for (schedule.busySince)
	lo, hi  float64 // the quickest and slowest round trips of the burst
	shifted float64 // how far the key's turns moved for it
}

// spread applies, after advance, a response at now to a unit sent at
// sentAt, which took rtt there and back, for a key with a configured
// limit (see above). It reports whether the turns moved.
func (s *schedule) spread(now float64, c pacing, b *burstSpread, sentAt, rtt float64) bool {
	interval, _ := s.pace(now, c)
	if c.interval == 0 || interval <= 0 || sentAt < s.busySince || sentAt-s.busySince >= interval {
		return false // not a unit of the busy period's first burst
	}
	if !b.seen || b.at != s.busySince {
		*b = burstSpread{seen: true, at: s.busySince, lo: rtt, hi: rtt}
	}
	b.lo, b.hi = min(b.lo, rtt), max(b.hi, rtt)
	want := min(b.hi-b.lo, anchorMax*interval)
	if want <= b.shifted {
		return false
	}
	s.tat = max(s.tat, now) + want - b.shifted
	b.shifted = want
	return true
}

// A wait that wakes late sends late, and on an anchored key the server
// sees that lateness whole in the gap before it (the anchor counts the
// request before from when it went). Where a key's timers fire late by
// more than spinShare of an interval (Go's netpoller waits in whole
// milliseconds: 0.4 to 0.8 ms late in the median on Linux, 2 to 4% of
// a strict 50/s server's gap), a wait on an anchored key sets its timer
// early by twice that lateness (at most anchorMax of an interval) and
// yields the processor (runtime.Gosched) from then until its turn, so
// that it goes within microseconds of it: a few hundred µs of a core per
// request, on anchored keys only. A bubble's timers fire on time: there
// a wait never spins.
const (
	spinShare = 0.005
	lateStep  = 1.0 / 16
)

// timerLate is how late a key's timers fire after their time (an
// exponentially weighted mean, lateStep a firing).
type timerLate float64

func (l *timerLate) observe(d float64) {
	*l += timerLate(lateStep * (max(d, 0) - float64(*l)))
}

// spinLead returns how long before its turn a wait on the key should
// stop sleeping and spin (see above), 0 for not at all. It requires
// b.mu.
func (b *bucket) spinLead(now float64) float64 {
	interval, _ := b.s.pace(now, b.pacing)
	late := float64(b.late)
	if late <= spinShare*interval || !b.s.anchored(now, b.pacing) {
		return 0
	}
	return min(2*late, anchorMax*interval)
}
