package distributed

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/throttle-go/throttle"
)

// TestStateMatchesLimiter applies the same operations to a key of a
// throttle.Limiter and to one of a Limiter of the same limits and
// compares their States: the script's view and the engine's are one rule
// in two languages. Counts
// must match exactly; times and fractional tokens within what the calls
// between the two took (a unit is 500ms at 2/s).
func TestStateMatchesLimiter(t *testing.T) {
	_, c := startRedis(t)
	type key = throttle.Quota
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
			_, _ = k.Observe(ctx, throttle.Feedback{Spent: 1, Window: &throttle.ServerWindow{Remaining: 2, Reset: 10 * time.Second, Size: 50}})
		}},
		// A burst's answers out of order (TestWindowInFlightOnce): the
		// units in flight counted once, 45 left.
		{"window out of order", func(k key) {
			_ = k.WaitN(ctx, 5)
			for _, left := range []float64{47, 49, 45, 46, 48} {
				_, _ = k.Observe(ctx, throttle.Feedback{Spent: 1, Window: &throttle.ServerWindow{Remaining: left, Reset: 10 * time.Second, Size: 50}})
			}
		}},
		{"window spent", func(k key) {
			_, _ = k.Observe(ctx, throttle.Feedback{Window: &throttle.ServerWindow{Remaining: 0, Reset: 4 * time.Second, Size: 50}})
		}},
		// A refusal that said when to come back trims the pace (2/s to
		// 1.98/s) as well as pausing.
		{"refused", func(k key) {
			_ = k.WaitN(ctx, 5)
			_, _ = k.Observe(ctx, throttle.Feedback{Verdict: throttle.Refused, Spent: 1, Pause: time.Second})
		}},
		{"settled back", func(k key) {
			_ = k.WaitN(ctx, 5)
			_ = k.Settle(ctx, throttle.Cost{N: 5}, throttle.Cost{N: 2})
		}},
		{"settled debt", func(k key) {
			_ = k.WaitN(ctx, 4)
			_ = k.Settle(ctx, throttle.Cost{N: 4}, throttle.Cost{N: 9})
		}},
		{"settled in a window", func(k key) {
			_, _ = k.Observe(ctx, throttle.Feedback{Window: &throttle.ServerWindow{Remaining: 8, Reset: 10 * time.Second, Size: 50}})
			_ = k.WaitN(ctx, 2)
			_ = k.Settle(ctx, throttle.Cost{N: 2}, throttle.Cost{N: 5})
		}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			limits := []throttle.Limit{{Rate: 2, Burst: 5}}
			lk := (&throttle.Limiter{Limits: limits}).For("k")
			q := New(c, "statemodel"+string(rune('a'+i)), limits...)
			defer q.Close()
			qk := q.For("k")
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
			case got.Remaining != want.Remaining, got.Queued != want.Queued, got.Rate != want.Rate,
				got.Burst != want.Burst, got.SlowedDown != want.SlowedDown, got.Declared != want.Declared,
				!sameWindow(got.Window, want.Window, slack+time.Millisecond),
				math.Abs(got.Tokens-want.Tokens) > units+1e-6,
				(got.Next - want.Next).Abs() > slack+time.Millisecond,
				(got.Paused - want.Paused).Abs() > slack+time.Millisecond:
				t.Errorf("Limiter's State %+v (window %+v)\n\tthrottle.Limiter's %+v (window %+v)\n\t(ops %v apart)", got, got.Window, want, want.Window, slack)
			}
		})
	}
}

// TestHiddenBudgetMatchesLimiter: the hidden budget's rules
// (schedule_budget.go and .lua) as one: refusals with a Retry-After of
// 500ms around two cycles of 4 units (two refused) learn 2 units per
// 500ms and more, spent until the last pause ends; the probe past it,
// accepted, starts the next window, 1 unit left, which a refusal of a unit
// of its burst (a miss) keeps. Each key's State is read as its ops end (a throttle.Limiter's and a Limiter's, one after the other),
// and the pause each reported for the first refusal (its Retry-After) and
// for the miss (ended a window after the unit before it: what a
// Transport's EventPause shows).
func TestHiddenBudgetMatchesLimiter(t *testing.T) {
	t.Parallel()
	_, c := startRedis(t)
	ctx := context.Background()
	type key = throttle.Quota
	type pauses struct{ first, miss time.Duration }
	run := func(k key) (learned, probed, missed throttle.State, told pauses) {
		refuse := func() {
			_, _ = k.Observe(ctx, throttle.Feedback{Verdict: throttle.Refused, Spent: 1, Age: time.Millisecond, Pause: 500 * time.Millisecond})
		}
		a, err := k.Observe(ctx, throttle.Feedback{Verdict: throttle.Refused, Spent: 1, Age: time.Millisecond, Pause: 500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		told.first = a.Pause
		for range 2 {
			_ = k.WaitN(ctx, 4) // after the pause
			refuse()
			// A unit in flight when the cycle ended, refused: the cycle
			// takes it back.
			_, _ = k.Observe(ctx, throttle.Feedback{Verdict: throttle.Refused, Spent: 1, Age: 100 * time.Millisecond, Pause: 500 * time.Millisecond})
		}
		learned, _ = k.State(ctx)
		_ = k.WaitN(ctx, 1) // the probe, at the window's reset
		_, _ = k.Observe(ctx, throttle.Feedback{Verdict: throttle.Accepted, Spent: 1})
		probed, _ = k.State(ctx)
		// A unit of the window's burst refused: a miss, not a cycle; the
		// window stays, its unit left.
		a, err = k.Observe(ctx, throttle.Feedback{Verdict: throttle.Refused, Spent: 1, Pause: 500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		told.miss = a.Pause
		missed, _ = k.State(ctx)
		return learned, probed, missed, told
	}
	limits := []throttle.Limit{{Rate: 10, Burst: 10}}
	q := New(c, "hiddenmodel", limits...)
	defer q.Close()
	wl, wp, wm, wt := run((&throttle.Limiter{Limits: limits}).For("k"))
	gl, gp, gm, gt := run(q.For("k"))
	if wt.first != 500*time.Millisecond || gt.first != 500*time.Millisecond ||
		wt.miss <= 0 || wt.miss > 100*time.Millisecond || (gt.miss-wt.miss).Abs() > 20*time.Millisecond {
		t.Errorf("pauses reported: Limiter's %+v, throttle.Limiter's %+v; want the first refusal's 500ms in both, the miss's under 100ms and within 20ms of each other", gt, wt)
	}
	for _, p := range []struct {
		name      string
		got, want throttle.State
	}{{"learned", gl, wl}, {"probed", gp, wp}, {"missed", gm, wm}} {
		got, want := p.got, p.want
		if want.Window == nil || !sameWindow(got.Window, want.Window, 20*time.Millisecond) || (got.Paused-want.Paused).Abs() > 20*time.Millisecond {
			t.Errorf("%s: Limiter's State %+v (window %+v)\n\tthrottle.Limiter's %+v (window %+v)", p.name, got, got.Window, want, want.Window)
		}
	}
	if left(wl) != 0 || left(wp) != 1 || wl.Paused < 400*time.Millisecond || left(wm) != 1 || wm.Paused > 100*time.Millisecond {
		t.Errorf("Limiter: learned %+v, probed %+v, missed %+v; want the window spent while paused, then 1 left, kept through the miss, whose pause ends a window after the unit before it", wl, wp, wm)
	}
}

// sameWindow reports whether two states' server windows are the same:
// both none, or the same units left and resets within slack.
func sameWindow(got, want *throttle.ServerWindow, slack time.Duration) bool {
	if got == nil || want == nil {
		return got == want
	}
	return got.Remaining == want.Remaining && (got.Reset-want.Reset).Abs() <= slack
}

// left returns the units left of st's server window; -1 without one.
func left(st throttle.State) float64 {
	if st.Window == nil {
		return -1
	}
	return st.Window.Remaining
}
