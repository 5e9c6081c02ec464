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
