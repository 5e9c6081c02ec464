package local

import "github.com/throttle-go/throttle/internal/schedule"

// View is a key's state at an instant, in schedule units (ns from the
// set's epoch).
type View struct {
	schedule.View
	Now float64
	// Next: the turn of a wait of one unit behind every queued wait,
	// whichever limit holds them (FIFO).
	Next float64
	// Limits: the further limits' views, if asked for.
	Limits []schedule.LimitView
	// Sec: the schedule's units in a second.
	Sec float64
}

// View returns the key's state now; with limits, the further limits'
// views too. It changes nothing a call at now would not.
func (k *Key) View(limits bool) View {
	k.mu.Lock() // a forgotten key shows the state it had
	defer k.mu.Unlock()
	now := k.ks.Now()
	// advance only lets go what has gone already (it is how the state is
	// read lazily): the view is that of any call at now.
	k.advanceLocked(now)
	v := View{View: k.s.View(now, k.pacing), Now: now, Sec: k.pacing.Sec}
	var ls *[]schedule.LimitView
	if limits {
		ls = &v.Limits
	}
	v.Next = max(v.View.Next, k.s.LimitsView(now, k.pacing, ls))
	return v
}
