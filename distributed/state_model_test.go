package distributed

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/throttle-go/throttle"
)

// TestStateMatchesLimiter applies the same operations to a Limiter key
// and to a Quota key of the same rate and compares their States: the
// script's view and schedule.go's are one rule in two languages. Counts
// must match exactly; times and fractional tokens within what the calls
// between the two took (a unit is 500ms at 2/s).
func TestStateMatchesLimiter(t *testing.T) {
	_, c := startRedis(t)
	type key interface {
		throttle.Waiter
		throttle.Pauser
		throttle.Adapter
		throttle.Inspector
		throttle.Settler
	}
	ctx := context.Background()
	tests := []struct {
		name string
		ops  func(k key)
	}{
		{"new", func(k key) {}},
		{"spent", func(k key) {
			for range 3 {
				_ = k.WaitN(ctx, 1)
			}
		}},
		{"empty", func(k key) { _ = k.WaitN(ctx, 5) }},
		{"paused", func(k key) {
			_ = k.WaitN(ctx, 2)
			_ = k.Pause(ctx, 3*time.Second)
		}},
		{"window", func(k key) {
			_ = k.WaitN(ctx, 1)
			_ = k.Adapt(ctx, throttle.Feedback{Cost: 1, HasRemaining: true, Remaining: 2, Size: 50, Reset: 10 * time.Second})
		}},
		// A burst's answers out of order (TestWindowInFlightOnce): the
		// units in flight counted once, 45 left.
		{"window out of order", func(k key) {
			_ = k.WaitN(ctx, 5)
			for _, left := range []float64{47, 49, 45, 46, 48} {
				_ = k.Adapt(ctx, throttle.Feedback{Cost: 1, HasRemaining: true, Remaining: left, Size: 50, Reset: 10 * time.Second})
			}
		}},
		{"window spent", func(k key) {
			_ = k.Adapt(ctx, throttle.Feedback{HasRemaining: true, Remaining: 0, Size: 50, Reset: 4 * time.Second})
		}},
		// A refusal that said when to come back trims the pace (2/s to
		// 1.98/s) as well as pausing.
		{"refused", func(k key) {
			_ = k.WaitN(ctx, 5)
			_ = k.Adapt(ctx, throttle.Feedback{Cost: 1, Pause: time.Second, Refused: true})
		}},
		{"settled back", func(k key) {
			_ = k.WaitN(ctx, 5)
			_ = k.Settle(ctx, 5, 2)
		}},
		{"settled debt", func(k key) {
			_ = k.WaitN(ctx, 4)
			_ = k.Settle(ctx, 4, 9)
		}},
		{"settled in a window", func(k key) {
			_ = k.Adapt(ctx, throttle.Feedback{HasRemaining: true, Remaining: 8, Size: 50, Reset: 10 * time.Second})
			_ = k.WaitN(ctx, 2)
			_ = k.Settle(ctx, 2, 5)
		}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &throttle.Limiter{Limit: 2, Burst: 5}
			lk := l.For("k").(key)
			q := New(c, "statemodel"+string(rune('a'+i)), 2, 5)
			defer q.Close()
			qk := q.For("k").(key)
			start := time.Now()
			tt.ops(lk)
			tt.ops(qk)
			want, _ := lk.State(ctx)
			got, err := qk.State(ctx)
			if err != nil {
				t.Fatal(err)
			}
			slack := time.Since(start) // how far apart the two keys' ops are
			units := slack.Seconds() * 2
			switch {
			case got.Remaining != want.Remaining, got.Queued != want.Queued, got.Limit != want.Limit,
				got.Burst != want.Burst, got.Cut != want.Cut, got.Window != want.Window,
				got.WindowLeft != want.WindowLeft,
				math.Abs(got.Tokens-want.Tokens) > units+1e-6,
				(got.Next - want.Next).Abs() > slack+time.Millisecond,
				(got.Paused - want.Paused).Abs() > slack+time.Millisecond,
				(got.WindowReset - want.WindowReset).Abs() > slack+time.Millisecond:
				t.Errorf("Quota's State %+v\n\tLimiter's %+v\n\t(ops %v apart)", got, want, slack)
			}
		})
	}
}

// TestHiddenBudgetMatchesLimiter: the hidden budget's rules
// (schedule_budget.go and .lua) as one: refusals with a Retry-After of
// 500ms around two cycles of 4 units (two refused) learn 2 units per
// 500ms and more, spent until the last pause ends; the probe past it,
// accepted, starts the next window, 1 unit left, which a refusal of a unit
// of its burst (a miss) keeps. Each key's State is read as its ops end (a Limiter's and a Quota's, one after the other),
// and the pause each reported for the first refusal (its Retry-After) and
// for the miss (ended a window after the unit before it: what a
// Transport's EventPause shows).
func TestHiddenBudgetMatchesLimiter(t *testing.T) {
	t.Parallel()
	_, c := startRedis(t)
	ctx := context.Background()
	type key interface {
		throttle.Waiter
		throttle.Adapter
		throttle.Inspector
		throttle.AdaptReporter
	}
	type pauses struct{ first, miss time.Duration }
	run := func(k key) (learned, probed, missed throttle.State, told pauses) {
		refuse := func() {
			_ = k.Adapt(ctx, throttle.Feedback{Cost: 1, Pause: 500 * time.Millisecond, Refused: true, Age: time.Millisecond})
		}
		a, err := k.AdaptReport(ctx, throttle.Feedback{Cost: 1, Pause: 500 * time.Millisecond, Refused: true, Age: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		told.first = a.Pause
		for range 2 {
			_ = k.WaitN(ctx, 4) // after the pause
			refuse()
			// A unit in flight when the cycle ended, refused: the cycle
			// takes it back.
			_ = k.Adapt(ctx, throttle.Feedback{Cost: 1, Pause: 500 * time.Millisecond, Refused: true, Age: 100 * time.Millisecond})
		}
		learned, _ = k.State(ctx)
		_ = k.WaitN(ctx, 1) // the probe, at the window's reset
		_ = k.Adapt(ctx, throttle.Feedback{Cost: 1, Accepted: true})
		probed, _ = k.State(ctx)
		// A unit of the window's burst refused: a miss, not a cycle; the
		// window stays, its unit left.
		a, err = k.AdaptReport(ctx, throttle.Feedback{Cost: 1, Pause: 500 * time.Millisecond, Refused: true})
		if err != nil {
			t.Fatal(err)
		}
		told.miss = a.Pause
		missed, _ = k.State(ctx)
		return learned, probed, missed, told
	}
	l := &throttle.Limiter{Limit: 10, Burst: 10}
	q := New(c, "hiddenmodel", 10, 10)
	defer q.Close()
	wl, wp, wm, wt := run(l.For("k").(key))
	gl, gp, gm, gt := run(q.For("k").(key))
	if wt.first != 500*time.Millisecond || gt.first != 500*time.Millisecond ||
		wt.miss <= 0 || wt.miss > 100*time.Millisecond || (gt.miss-wt.miss).Abs() > 20*time.Millisecond {
		t.Errorf("pauses reported: Quota's %+v, Limiter's %+v; want the first refusal's 500ms in both, the miss's under 100ms and within 20ms of each other", gt, wt)
	}
	for _, p := range []struct {
		name      string
		got, want throttle.State
	}{{"learned", gl, wl}, {"probed", gp, wp}, {"missed", gm, wm}} {
		got, want := p.got, p.want
		if !want.Window || got.Window != want.Window || got.WindowLeft != want.WindowLeft ||
			(got.WindowReset-want.WindowReset).Abs() > 20*time.Millisecond || (got.Paused-want.Paused).Abs() > 20*time.Millisecond {
			t.Errorf("%s: Quota's State %+v\n\tLimiter's %+v", p.name, got, want)
		}
	}
	if wl.WindowLeft != 0 || wp.WindowLeft != 1 || wl.Paused < 400*time.Millisecond || wm.WindowLeft != 1 || wm.Paused > 100*time.Millisecond {
		t.Errorf("Limiter: learned %+v, probed %+v, missed %+v; want the window spent while paused, then 1 left, kept through the miss, whose pause ends a window after the unit before it", wl, wp, wm)
	}
}
