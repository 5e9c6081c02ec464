package throttle

import (
	"time"

	"github.com/throttle-go/throttle/internal/schedule"
)

// The events of a Limiter's own decisions: what Adapt and Pause changed in
// a key's schedule, read by comparing the schedule before and after the
// call, and reported once the key's lock is released; and a cut's end,
// reported by a timer armed when the cut starts (only when someone
// listens).

// decided holds the events of one call, to emit after the lock; nil (no
// allocation) when the call decided nothing.
type decided []Event

func (d *decided) add(e Event) {
	*d = append(*d, e)
}

// emit reports the events to the Limiter's OnEvent and to the call's
// sink. It must be called without b.mu.
func (d decided) emit(onEvent func(Event), sink *eventSink) {
	for _, e := range d {
		if sink != nil {
			e = sink.fill(e)
		}
		if onEvent != nil {
			onEvent(e)
		}
		if sink != nil {
			sink.fn(e)
		}
	}
}

// watchLocked returns the schedule's state at now that decisions are read
// against (see schedule.State.Watch). It requires b.mu, after advance.
func (b *bucket) watchLocked(now float64, rejected bool) schedule.Watch {
	return b.s.Watch(now, b.pacing, rejected)
}

// decideLocked returns the events of what changed since w, at now (see
// schedule.State.Decide): a slow-down, a declared pace adopted or
// changed, a new window learned, and a shift of a millisecond or more.
// It arms the recovery timer of a cut that started. It requires b.mu.
func (b *bucket) decideLocked(now float64, w schedule.Watch, sink *eventSink) decided {
	var d decided
	x := b.s.Decide(now, b.pacing, w)
	if x.Cut {
		d.add(Event{Kind: EventSlowDown, Key: b.key, Rate: x.CutRate})
		b.armRecoveryLocked(now, x.CutEnd)
	}
	if x.Trimmed {
		d.add(Event{Kind: EventSlowDown, Key: b.key, Rate: x.TrimRate})
	}
	if b.recovery != nil && sink != nil {
		b.recoverTo = sink.fn // the last Transport that adapted the key
	}
	if x.Declared {
		d.add(Event{Kind: EventDeclared, Key: b.key, Rate: x.DeclaredRate, Burst: int(x.DeclaredBurst)})
	}
	if x.Window {
		d.add(Event{Kind: EventWindow, Key: b.key, Remaining: x.WindowLeft, Delay: duration(x.WindowReset - now)})
	}
	if delay := duration(x.Shift); delay >= minReportedWait {
		d.add(Event{Kind: EventShift, Key: b.key, Delay: delay})
	}
	return d
}

// listening reports whether anyone listens to the key's decisions: the
// call's sink or the Limiter's OnEvent.
func (b *bucket) listening(sink *eventSink) bool {
	return sink != nil || b.l.OnEvent != nil
}

// armRecoveryLocked arms the timer that reports the end, at end, of the
// cut that started at now. It requires b.mu.
func (b *bucket) armRecoveryLocked(now, end float64) {
	if b.recovery != nil {
		b.recovery.Stop()
	}
	b.recoverTo = nil
	b.recovery = time.AfterFunc(duration(end-now), func() { b.recovered(now) })
}

// recovered reports that the cut that started at at has ended, unless a
// later cut replaced it (its own timer reports that one).
func (b *bucket) recovered(at float64) {
	b.mu.Lock()
	now := b.l.now()
	over, end, ok := b.s.CutEnds(now, b.pacing, at)
	if !ok {
		b.mu.Unlock()
		return
	}
	if !over {
		b.recovery.Reset(duration(end - now))
		b.mu.Unlock()
		return
	}
	to := b.recoverTo
	b.recovery, b.recoverTo = nil, nil
	interval, _ := b.s.Base(b.pacing)
	b.mu.Unlock()
	e := Event{Kind: EventRecovered, Key: b.key}
	if interval > 0 {
		e.Rate = b.pacing.Sec / interval
	}
	if b.l.OnEvent != nil {
		b.l.OnEvent(e)
	}
	if to != nil {
		to(e)
	}
}
