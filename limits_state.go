package throttle

import "math"

// LimitState is one of a key's further limits ([Limiter.Limits]) as
// [Limiter.LimitStates] shows it. (The key's [State] is its first
// limit's, but for Next, which counts every limit.)
type LimitState struct {
	// Unit is the limit's unit; Window reports a window (else a bucket).
	Unit   string
	Window bool
	// Remaining is how many of its units a wait could spend at once now,
	// once the waits queued have spent theirs (a bucket's level, what a
	// window has left; negative while queued waits owe more than it
	// holds): x/time/rate's Tokens for this limit.
	Remaining float64
}

// xview moves st.Next behind the queued waits' turns (FIFO: a wait of
// one unit goes after them, whichever limit holds them) and appends the
// further limits' views at now to ls, if not nil. It requires advance at
// now.
func (s *schedule) xview(now float64, c pacing, st *State, units []string, ls *[]LimitState) {
	x := s.x
	if x == nil {
		return
	}
	last := math.Inf(-1)
	x.walk(s, now, c, func(_, _ int, t float64) bool {
		last = t
		return true
	})
	if d := duration(last - now); d > st.Next {
		st.Next = d
	}
	if ls == nil {
		return
	}
	for i := range x.scratch {
		l := &x.scratch[i] // the limits after the queued waits
		v := LimitState{Unit: units[i], Window: l.kind != xBucket, Remaining: math.Inf(1)}
		switch {
		case l.kind == xBucket && l.interval > 0:
			v.Remaining = min(l.burst, (now-l.tat+l.tau)/l.interval)
		case l.kind == xFixed:
			_, cur := l.counts(math.Floor((now + l.off) / l.w))
			v.Remaining = l.q - cur
		case l.kind == xFirst:
			v.Remaining = l.q
			if now < l.start+l.w {
				v.Remaining = l.q - l.cur
			}
		case l.kind == xLog:
			v.Remaining = l.q - l.logUnits(now)
		case l.kind == xSliding:
			i := math.Floor((now + l.off) / l.w)
			prev, cur := l.counts(i)
			v.Remaining = math.Floor(l.q - prev*(1-((now+l.off)/l.w-i)) - cur)
		}
		*ls = append(*ls, v)
	}
}

// LimitStates returns the state of key's further limits now
// ([Limiter.Limits], in their order; a limit with both a Rate and a
// Window shows as two), without creating the key; nil if it has none.
func (l *Limiter) LimitStates(key string) []LimitState {
	l.once.Do(l.init)
	b := l.def
	if key != "" {
		v, ok := l.keys.Load(key)
		if !ok {
			l.insertMu.Lock()
			b = l.newBucket(key) // not stored
			l.insertMu.Unlock()
		} else {
			b = v.(*bucket)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.l.now()
	b.advanceLocked(now)
	var st State
	var ls []LimitState
	b.s.xview(now, b.pacing, &st, b.xunits, &ls)
	return ls
}
