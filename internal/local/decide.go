package local

import (
	"time"

	"github.com/throttle-go/throttle/internal/schedule"
)

// What a key decides by itself (a slow-down and its end, queued turns
// moved later, a window learned, a declared pace adopted, an acquisition
// that blocked on the in-flight cap) is told as a Decided, after the
// key's lock is released.

// DecisionKind tells what a Decided reports.
type DecisionKind int

// The kinds of decisions.
const (
	SlowDown  DecisionKind = iota + 1 // the pace cut or trimmed to Rate
	Recovered                         // the pace back to Rate after a slow-down (0: none)
	Shift                             // the queued turns moved later by Delay
	Window                            // a window learned: Remaining until Delay
	Declared                          // a declared pace adopted: Rate, Burst
	InFlight                          // an acquisition blocked Delay on the cap (Err: without the units)
	Clamp                             // a settle's charge past what Limit holds at once: Units dropped
	QueueFull                         // a wait of Units refused by the bound on the units queued (Err)
)

// Decided is one decision of a key.
type Decided struct {
	Kind      DecisionKind
	Rate      float64 // units a second
	Burst     int
	Remaining float64
	Delay     time.Duration
	Err       error
	// Limit is the further limit a Clamp is of (its index), -1 for the
	// first; Units the units dropped.
	Limit int
	Units float64
}

// Listener is who is told of a call's decisions: Emit, everyone who
// listens to the call (nil: no one, and the decisions are not read);
// Call, the call's own listener alone, if it has one, which is also told
// of the end of a slow-down the call started.
type Listener struct {
	Emit func(Decided)
	Call func(Decided)
}

func (to Listener) emit(ds []Decided) {
	for _, d := range ds {
		to.Emit(d)
	}
}

// minShift is the shortest move of the queued turns reported.
const minShift = time.Millisecond

// decideLocked returns what changed since w, at now (see
// schedule.State.Decide), and arms the timer that reports the end of a
// cut that started. It requires k.mu.
func (k *Key) decideLocked(now float64, w schedule.Watch, to Listener) []Decided {
	var ds []Decided
	x := k.s.Decide(now, k.pacing, w)
	if x.Cut {
		ds = append(ds, Decided{Kind: SlowDown, Rate: x.CutRate})
		k.armRecoveryLocked(now, x.CutEnd)
	}
	if x.Trimmed {
		ds = append(ds, Decided{Kind: SlowDown, Rate: x.TrimRate})
	}
	if k.recovery != nil && to.Call != nil {
		k.recoverTo = to.Call // the last call's listener that adapted the key
	}
	if x.Declared {
		ds = append(ds, Decided{Kind: Declared, Rate: x.DeclaredRate, Burst: int(x.DeclaredBurst)})
	}
	if x.Window {
		ds = append(ds, Decided{Kind: Window, Remaining: x.WindowLeft, Delay: Duration(x.WindowReset - now)})
	}
	if delay := Duration(x.Shift); delay >= minShift {
		ds = append(ds, Decided{Kind: Shift, Delay: delay})
	}
	return ds
}

// armRecoveryLocked arms the timer that reports the end, at end, of the
// cut that started at now. It requires k.mu.
func (k *Key) armRecoveryLocked(now, end float64) {
	if k.recovery != nil {
		k.recovery.Stop()
	}
	k.recoverTo = nil
	k.recovery = time.AfterFunc(Duration(end-now), func() { k.recovered(now) })
}

// recovered reports that the cut that started at at has ended, unless a
// later cut replaced it (its own timer reports that one): to the set's
// Decided and to the last call's listener that adapted the key.
func (k *Key) recovered(at float64) {
	k.mu.Lock()
	now := k.ks.Now()
	over, end, ok := k.s.CutEnds(now, k.pacing, at)
	if !ok {
		k.mu.Unlock()
		return
	}
	if !over {
		k.recovery.Reset(Duration(end - now))
		k.mu.Unlock()
		return
	}
	to := k.recoverTo
	k.recovery, k.recoverTo = nil, nil
	interval, _ := k.s.Base(k.pacing)
	k.mu.Unlock()
	d := Decided{Kind: Recovered}
	if interval > 0 {
		d.Rate = k.pacing.Sec / interval
	}
	if f := k.ks.c.Decided; f != nil {
		f(k.key, d)
	}
	if to != nil {
		to(d)
	}
}
