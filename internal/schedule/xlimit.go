package schedule

import "math"

// One further limit of a key (schedule_limits.go) and its rule: when it
// lets c units go, and what their going leaves. Five kinds:
//
//   - a token bucket (GCRA): c units may go at t ≥ tat + c·interval − τ,
//     and leave tat = max(tat, t) + c·interval;
//   - a fixed window of q units per w, aligned to the Unix epoch (as
//     servers count "100 a minute"): c units may go in a window while the
//     units gone in it and c are at most q, else at the next window's
//     start;
//   - a fixed window of q per w aligned to first use (as servers count
//     "100 a minute from your first request"): a window starts at the
//     first units that go once the one before ended (start, its count
//     cur); c units may go at t while t < start + w and cur + c ≤ q, or
//     from start + w (they then start the next window);
//   - a sliding window counter of q per w (as servers estimate it): c
//     units may go at t while prev·(1 − f) + cur + c ≤ q, cur the units
//     gone in t's window, prev those of the window before, f how far t
//     is into its window; the earliest such t solves for f;
//   - a sliding log of q per w (exact): c units may go at t while the
//     units gone in (t − w, t] and c are at most q; it keeps the times
//     units went at (log, one entry a time, oldest first) while they are
//     inside the last w, at most q entries but for settled charges
//     (schedule_xsettle.go), since every entry holds a unit or more
//     (MaxLogCount bounds q); the earliest such t is the time the
//     newest entry that must leave for c to fit leaves (its time + w).
//
// Each rule is monotone: units a limit lets go at t it lets go at any
// later t, so that a ticket's turn, the latest among the limits, is the
// least fixed point of moving it to each limit's earliest time.
type Limit struct {
	kind int // xBucket, xFixed or xSliding

	interval, tau, burst float64 // a bucket: its pace; burst·interval
	tat                  float64 // its state

	w, q float64 // a window: its length and units
	// off aligns the windows to the Unix epoch: t's window is
	// ⌊(t+off)/w⌋ (schedule times count from the Limiter's start).
	off            float64
	idx, cur, prev float64 // the last window units went in, and its counts
	// start: a window aligned to first use starts there (-Inf: none yet),
	// and counts cur.
	start float64

	// log: a sliding log's entries, oldest first. Copied with the limit
	// (the walk's scratch, due, save): never written in place, a take or a
	// settle makes a new slice.
	log []logEntry
}

// logEntry is c units gone at t, in a sliding log.
type logEntry struct{ t, c float64 }

const (
	KindBucket = iota
	KindFixed
	KindSliding
	KindLog
	KindFirst
)

// limits reports whether the limit counts anything (a bucket without a
// pace does not).
func (l *Limit) limits() bool { return l.kind != KindBucket || l.interval > 0 }

// counts returns the units gone in window i and in the one before it.
func (l *Limit) counts(i float64) (prev, cur float64) {
	switch i {
	case l.idx:
		return l.prev, l.cur
	case l.idx + 1:
		return l.cur, 0
	}
	return 0, 0
}

// earliest returns the earliest time from t at which the limit lets c > 0
// units go.
func (l *Limit) earliest(t, c float64) float64 {
	if l.kind == KindBucket {
		if l.interval > 0 {
			t = max(t, l.tat+c*l.interval-l.tau)
		}
		return t
	}
	switch l.kind {
	case KindLog:
		return l.logEarliest(t, c)
	case KindFirst:
		// FIFO: no unit goes before the window's start.
		if t = max(t, l.start); t < l.start+l.w && l.cur+c > l.q {
			return l.start + l.w
		}
		return t
	}
	start := func(i float64) float64 { return i*l.w - l.off }
	i := math.Floor((t + l.off) / l.w)
	if i < l.idx { // FIFO: no unit goes in a window before the last's
		i, t = l.idx, max(t, start(l.idx))
	}
	prev, cur := l.counts(i)
	if cur+c > l.q {
		i, t = i+1, start(i+1)
		prev, cur = cur, 0
	}
	if l.kind == KindSliding && prev > 0 {
		f := (t+l.off)/l.w - i
		if prev*(1-f)+cur+c > l.q+1e-9 {
			t = max(t, start(i)+(1-(l.q-cur-c)/prev)*l.w)
		}
	}
	return t
}

// take records c units gone at t.
func (l *Limit) take(t, c float64) {
	if l.kind == KindBucket {
		if l.interval > 0 {
			l.tat = max(l.tat, t) + c*l.interval
		}
		return
	}
	switch l.kind {
	case KindLog:
		l.logTake(t, c)
		return
	case KindFirst:
		if t = max(t, l.start); t >= l.start+l.w { // the first use since
			l.start, l.cur = t, 0
		}
		l.cur += c
		return
	}
	if i := math.Floor((t + l.off) / l.w); i > l.idx {
		l.prev, l.cur = l.counts(i)
		l.idx = i
	}
	l.cur += c
}

// full reports whether the limit at now is as a new key's: its bucket
// full, or its windows' counts past.
func (l *Limit) full(now float64) bool {
	if l.kind == KindBucket {
		return l.tat <= now
	}
	switch l.kind {
	case KindLog:
		return len(l.log) == 0 || l.log[len(l.log)-1].t+l.w <= now
	case KindFirst:
		return now >= l.start+l.w || l.cur == 0
	}
	return math.Floor((now+l.off)/l.w) > l.idx+1 || l.cur+l.prev == 0
}

// logEarliest is earliest for a sliding log: from the newest entry back,
// the first at which the units counted pass q − c must leave the window
// (at its time + w); FIFO: no unit goes before the newest entry's.
func (l *Limit) logEarliest(t, c float64) float64 {
	n := len(l.log)
	if n == 0 {
		return t
	}
	t = max(t, l.log[n-1].t)
	sum := 0.0
	for i := n - 1; i >= 0; i-- {
		e := l.log[i]
		if e.t+l.w <= t { // out of (t − w, t], and every older one
			break
		}
		if sum += e.c; sum+c > l.q {
			return e.t + l.w
		}
	}
	return t
}

// logTake is take for a sliding log: the entries out of the window at t
// leave, c units join at t (no earlier than the newest entry), in a new
// slice.
func (l *Limit) logTake(t, c float64) {
	i := 0
	for i < len(l.log) && l.log[i].t+l.w <= t {
		i++
	}
	old := l.log[i:]
	n := len(old)
	if n > 0 {
		t = max(t, old[n-1].t)
	}
	log := make([]logEntry, n, n+1)
	copy(log, old)
	if n > 0 && log[n-1].t == t {
		log[n-1].c += c
	} else {
		log = append(log, logEntry{t, c})
	}
	l.log = log
}

// logUnits returns the units a sliding log counts in (now − w, now].
func (l *Limit) logUnits(now float64) float64 {
	sum := 0.0
	for _, e := range l.log {
		if e.t+l.w > now {
			sum += e.c
		}
	}
	return sum
}

// BucketLimit returns a further limit that is a token bucket of the
// given interval per unit and burst (units at once).
func BucketLimit(interval, burst float64) Limit {
	return Limit{kind: KindBucket, interval: interval, burst: burst, tau: burst * interval}
}

// WindowLimit returns a further limit that is a window of kind (KindFixed,
// KindSliding, KindLog or KindFirst) of q units per w; off aligns fixed
// and sliding windows to the Unix epoch (t's window is ⌊(t+off)/w⌋).
func WindowLimit(kind int, w, q, off float64) Limit {
	l := Limit{kind: kind, w: w, q: q, off: off}
	if kind == KindFirst {
		l.start = math.Inf(-1)
	}
	return l
}

// Most returns the most units the limit lets go at once: its burst, its
// window's count; +Inf for a bucket without a pace.
func (l *Limit) Most() float64 {
	switch {
	case l.kind != KindBucket:
		return l.q
	case l.interval > 0:
		return l.burst
	}
	return math.Inf(1)
}

// Entries returns how many entries a sliding log keeps (0 for any other
// kind): at most its count, but for settled charges.
func (l *Limit) Entries() int { return len(l.log) }
