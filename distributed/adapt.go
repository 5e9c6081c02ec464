package distributed

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/internal/local"
	"github.com/throttle-go/throttle/internal/schedule"
)

// Observe applies what a response said of the key's quota for the whole
// fleet: see [throttle.Quota] and "Fleet-wide pacing" in the package
// doc. A Feedback that says nothing (no pause, no window, no refusal)
// costs nothing, but for the acceptance of a unit sent past a learned
// budget's window's reset (see there); otherwise one script call,
// bounded by Timeout, writes it. The pause it reports is the one the
// script set: f.Pause or, for a learned budget's refused probe, the rest
// of its window (schedule_budget.lua). A bare refusal is never taken for
// timing (Observed.Timing is false): a shared key has no anchor.
// f.Declared and f.Available are not used: a declared pace applies only
// where no limit is configured, and the window and the cut pace the
// fleet below the configured one; either, on a refusal, tells the
// script the server states its limits (no hidden budget). Observe never
// blocks beyond Timeout. If Redis cannot answer, the feedback is
// dropped: Observe returns no error, except that a pause that could not
// be written returns an error matching [ErrStoreUnavailable] (as Pause
// does, whatever the FailMode), so that a Transport does not report a
// pause that did not happen.
func (w *keyWaiter) Observe(ctx context.Context, f throttle.Feedback) (throttle.Observed, error) {
	r := responseOf(f)
	op := r.Op()
	if op.Accepted == schedule.AcceptedUnit {
		// Told only for a unit sent past a learned budget's window's
		// reset, which may start its next window (a probe's): the reset
		// as this process heard it, less learnedSlack (the script
		// decides by its own clock).
		if l := w.q.memo.learnedReset(w.rkey); l.IsZero() || time.Now().Add(-f.Age).Before(l.Add(-learnedSlack)) {
			op.Accepted = schedule.AcceptedNone
		}
	}
	if op.Pause <= 0 && !r.HasRemaining && !op.Rejected && op.Accepted != schedule.AcceptedUnit {
		return throttle.Observed{}, nil // nothing to tell
	}
	pause := min(max(f.Pause, 0), maxPause)
	reply, err := w.run(context.WithoutCancel(ctx), "adapt", adaptArgsOf(op, usOf).append(nil)...)
	if err == nil && len(reply) == radaptPause+1 && pause > 0 {
		// The script replies the pause it set, in µs.
		pause = min(pause, usDuration(max(reply[radaptPause], 0)))
	}
	if pause > 0 {
		// This process knows the pause even if Redis does not: FailLocal
		// honours it, and a state Redis lost gets it back.
		w.q.memo.pause(w.rkey, time.Now().Add(pause))
	}
	if err != nil {
		if f.Pause <= 0 {
			// What was lost is advice; the next response says it again.
			return throttle.Observed{}, nil
		}
		return throttle.Observed{}, fmt.Errorf("pausing %q: %w", w.key, unavailable(err))
	}
	return throttle.Observed{Pause: pause}, nil
}

// responseOf is what f tells of the key's quota, as the in-process
// Limiter reads it (its Op is the engine's op adapt).
func responseOf(f throttle.Feedback) local.Response {
	r := local.Response{
		Cost: f.Spent, Age: f.Age, Pause: f.Pause,
		Refused:   f.Verdict == throttle.Refused || f.Verdict == throttle.RefusedBare,
		Throttled: f.Verdict == throttle.RefusedBare,
		Accepted:  f.Verdict == throttle.Accepted,
	}
	if w := f.Window; w != nil {
		r.HasRemaining, r.Remaining, r.Size, r.Reset, r.Window = true, w.Remaining, w.Size, w.Reset, w.Length
	}
	if a := f.Available; a != nil {
		r.HasAvailable, r.Available = true, *a
	}
	if d := f.Declared; d != nil {
		r.HasDeclared, r.DeclaredRate, r.DeclaredBurst = true, d.Rate, d.Burst
	}
	return r
}

// usOf writes ns (a local.Response's op's times) as the script's µs: see
// us.
func usOf(ns float64) string { return us(time.Duration(ns)) }

// adaptArgsOf returns the arguments of op adapt that apply op, its times
// written by us (µs). The script has no declared pace and no server's
// bucket: op's Declared and Available are not sent.
func adaptArgsOf(op schedule.Adapt, us func(float64) string) adaptArgs {
	a := adaptArgs{
		Cost: num(op.Cost), Pause: us(op.Pause),
		Remaining: "", Reset: "0", Size: "0", Length: "0", // no window
		RejectedAge: "", Refused: "", Age: us(op.Age), Accepted: "",
	}
	if op.Window {
		a.Remaining, a.Reset, a.Size, a.Length = num(op.Left), us(op.Reset), num(op.Size), us(op.Length)
	}
	if op.Rejected {
		a.RejectedAge = us(op.RejectAge)
	}
	if op.Refused {
		a.Refused = flagOn
	}
	if op.Accepted != schedule.AcceptedNone {
		a.Accepted = op.Accepted
	}
	return a
}

// num writes v as the script reads it back exactly.
func num(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
