package local

import (
	"math"
	"time"

	"github.com/throttle-go/throttle/internal/schedule"
	"golang.org/x/time/rate"
)

// Response is what one response told of a key's quota (the root
// package's Feedback), durations relative to when it arrived.
type Response struct {
	Cost      int           // the units the request spent
	Age       time.Duration // since the request was sent; 0: unknown
	Pause     time.Duration // nothing before this from now; 0: none
	Refused   bool          // the server refused the request
	Throttled bool          // a bare refusal: no delay, no limit told
	Accepted  bool          // a unit sent past a learned window's reset was taken

	HasRemaining bool // the server's window: units left until Reset
	Remaining    float64
	Size         float64
	Reset        time.Duration
	Window       time.Duration

	HasDeclared   bool // a pace the server declared
	DeclaredRate  rate.Limit
	DeclaredBurst int

	HasAvailable bool // what the server's refilling bucket holds
	Available    float64
}

// Op returns the engine's op that applies r, its times in ns: the one
// translation of a response, for the in-process Key and a store's script
// alike. A bare refusal (Throttled) is Rejected, sent Age ago.
func (r Response) Op() schedule.Adapt {
	age := float64(max(r.Age, 0))
	op := schedule.Adapt{Cost: float64(max(r.Cost, 1)), Pause: float64(max(r.Pause, 0)), Refused: r.Refused, Age: age}
	switch {
	case r.Accepted:
		op.Accepted = schedule.AcceptedUnit
	case r.Refused && (r.HasRemaining || r.HasDeclared || r.HasAvailable):
		op.Accepted = schedule.AcceptedStated // a refusal that states a limit: no hidden budget
	}
	if r.Throttled {
		op.Rejected, op.RejectAge = true, age
	}
	if r.HasDeclared && r.DeclaredRate > 0 && r.DeclaredRate != rate.Inf && !math.IsNaN(float64(r.DeclaredRate)) {
		op.Declared, op.DeclaredInterval, op.DeclaredBurst = true, 1e9/float64(r.DeclaredRate), float64(max(r.DeclaredBurst, 1))
	}
	if r.HasRemaining && !math.IsNaN(r.Remaining) && !math.IsNaN(r.Size) {
		op.Window, op.Left, op.Reset, op.Size, op.Length = true, max(r.Remaining, 0), float64(max(r.Reset, 0)), max(r.Size, 0), float64(max(r.Window, 0))
	}
	if r.HasAvailable && !math.IsNaN(r.Available) {
		op.HasAvailable, op.Available = true, r.Available
	}
	return op
}

// Pause holds off every caller of the key until d from now, the queued
// waits included. A pause never shortens a longer one. to is told of
// what the key decided.
func (k *Key) Pause(d time.Duration, to Listener) {
	if d <= 0 {
		return
	}
	k = k.lock()
	now := k.ks.Now()
	k.advanceLocked(now)
	listen := to.Emit != nil
	var w schedule.Watch
	if listen {
		w = k.s.Watch(now, k.pacing, false)
	}
	var ds []Decided
	if k.s.Apply(now, k.pacing, schedule.Pause{D: float64(d)}).Moved {
		if listen {
			ds = k.decideLocked(now, w, to)
		}
		k.notifyLocked()
	}
	k.mu.Unlock()
	to.emit(ds)
}

// Adapt applies what a response said of the key's quota. It reports
// whether it was a bare refusal of a strict server's timing, which left
// the pace as it was (internal/strict), and the pause it set: r.Pause, or
// less where a learned budget's refused probe ends it sooner. to is told
// of what the key decided.
func (k *Key) Adapt(r Response, to Listener) (timing bool, pause time.Duration) {
	pause = r.Pause
	k = k.lock()
	now := k.ks.Now()
	s := &k.s
	k.advanceLocked(now)
	listen := to.Emit != nil
	var w schedule.Watch
	if listen {
		w = s.Watch(now, k.pacing, r.Throttled)
	}
	units := float64(max(r.Cost, 1))
	sent := now - float64(max(r.Age, 0))
	op := r.Op()
	// A bare refusal goes through the strict server's rules below: one
	// of its timing leaves the pace as it was.
	op.Rejected, op.RejectAge = false, 0
	a := s.Apply(now, k.pacing, op)
	moved := a.Moved
	if r.Pause > 0 {
		pause = min(pause, time.Duration(math.Ceil(a.Until-now)))
	}
	st := &k.strict
	st.Saw(s)
	st.RoundTrip(float64(r.Age))
	if !r.Refused && !r.Throttled && r.Pause == 0 && st.Took(s, now, k.pacing, float64(r.Age)) {
		moved = true
	}
	switch {
	case r.Throttled && st.Timing(s, now, k.pacing, sent):
		// A refusal of the strict server's timing: the pace stays.
		timing = true
	case r.Throttled:
		st.Refused()
		if s.Reject(now, sent, units, k.pacing) {
			moved = true
		}
		st.Saw(s)
	case r.Refused:
		st.Refused()
	default:
		st.Answered(units)
	}
	var ds []Decided
	if moved {
		if listen {
			ds = k.decideLocked(now, w, to)
		}
		k.notifyLocked()
	}
	k.mu.Unlock()
	to.emit(ds)
	return timing, pause
}
