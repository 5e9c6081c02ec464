package learn

import (
	"testing"
	"time"

	"github.com/throttle-go/throttle/ratelimit"
)

func TestResetAtBound(t *testing.T) {
	var o Keys
	at := time.Unix(1_000_000_000, 0) // the instant, on the server's clock
	t0 := time.Unix(2_000_000_000, 0) // our clock: a skew changes nothing
	reading := func(reset time.Duration, stated time.Time) ratelimit.Reading {
		return ratelimit.Reading{Policies: []ratelimit.Policy{{Unit: "requests", Limit: 50, Remaining: 0, Window: 10 * time.Second, Reset: reset, ResetAt: stated,
			HasLimit: true, HasRemaining: true, HasWindow: true, HasReset: true}}}
	}
	for _, step := range []struct {
		name   string
		after  time.Duration // the response came at t0+after
		reset  time.Duration // its reset, against its whole-second Date
		stated time.Time
		want   time.Duration
	}{
		{"the first", 0, time.Second, at, time.Second},
		{"the same second's Date, 600ms on", 600 * time.Millisecond, time.Second, at, 400 * time.Millisecond},
		{"the next second's Date", 1100 * time.Millisecond, 0, at, 0},
		{"a later bound adds nothing", 900 * time.Millisecond, time.Second, at, 100 * time.Millisecond},
		{"another instant", 1200 * time.Millisecond, 2 * time.Second, at.Add(2 * time.Second), 2 * time.Second},
		{"its bound", 1500 * time.Millisecond, 2 * time.Second, at.Add(2 * time.Second), 1700 * time.Millisecond},
		{"a delay", 1600 * time.Millisecond, 5 * time.Second, time.Time{}, 5 * time.Second},
	} {
		q := o.Read("k", reading(step.reset, step.stated), "requests", 1, false, t0.Add(step.after))
		if got := q.Policies[0].Reset; got != step.want {
			t.Errorf("%s: reset %v; want %v", step.name, got, step.want)
		}
	}
}
