package throttle_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"

	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/internal/schedtest"
)

// Waiters that break one rule each, for TestPropCheckerCatches.
type (
	// propFree admits every wait at once.
	propFree struct{}
	// propLate is a Limiter key that returns a millisecond after its turn.
	propLate struct{ throttle.Quota }
	// propDeaf is a Limiter key that ignores pauses and what servers say.
	propDeaf struct{ throttle.Quota }
	// propSulk is a Limiter key that holds off for ten minutes after a
	// rejection.
	propSulk struct{ throttle.Quota }
)

// Waiters of several limits that break the all-or-none rule.
type (
	// propFirstOnly is a Limiter key that spends a cost's first-limit
	// units only.
	propFirstOnly struct{ throttle.Quota }
	// propChained waits on one Limiter per limit in turn, as a user
	// chaining waiters by hand would: a wait cancelled on the second
	// keeps what it spent on the first.
	propChained struct {
		throttle.Quota // the first limit's
		tokens         throttle.Waiter
	}
)

// firstUnits returns the units costs spend of the first limit.
func firstUnits(costs []throttle.Cost) int {
	if len(costs) == 0 {
		return 1
	}
	n := 0
	for _, c := range costs {
		n += max(c.N, 1)
	}
	return n
}

func (w propFirstOnly) Wait(ctx context.Context, costs ...throttle.Cost) error {
	return w.WaitN(ctx, firstUnits(costs))
}

func (w propChained) Wait(ctx context.Context, costs ...throttle.Cost) error {
	if err := w.WaitN(ctx, firstUnits(costs)); err != nil {
		return err
	}
	for _, c := range costs {
		for _, n := range c.Units {
			if err := w.tokens.WaitN(ctx, n); err != nil {
				return err
			}
		}
	}
	return nil
}

func (w propSulk) Observe(ctx context.Context, f throttle.Feedback) (throttle.Observed, error) {
	if f.Verdict == throttle.RefusedBare {
		return throttle.Observed{Pause: 10 * time.Minute}, w.Pause(ctx, 10*time.Minute)
	}
	return w.Quota.Observe(ctx, f)
}

func (propFree) WaitN(ctx context.Context, n int) error { return ctx.Err() }

func (w propLate) WaitN(ctx context.Context, n int) error {
	err := w.Quota.WaitN(ctx, n)
	time.Sleep(time.Millisecond)
	return err
}

func (propDeaf) Pause(context.Context, time.Duration) error { return nil }
func (propDeaf) Observe(context.Context, throttle.Feedback) (throttle.Observed, error) {
	return throttle.Observed{}, nil
}

// TestPropCheckerCatches checks that the property suite is not vacuous:
// waiters that break a rule are caught, each by the invariant it breaks.
func TestPropCheckerCatches(t *testing.T) {
	waits := schedtest.Options{Deadlines: true, Cancels: true}
	tests := []struct {
		name string
		cfg  schedtest.Config
		opt  schedtest.Options
		new  func(cfg schedtest.Config) throttle.Waiter
		want string // a violation starting with this is found
	}{
		{"admits at once", schedtest.Config{Limit: 10, Burst: 2}, waits,
			func(schedtest.Config) throttle.Waiter { return propFree{} }, "never over"},
		{"late by 1ms", schedtest.Config{Limit: 10, Burst: 2}, waits,
			func(c schedtest.Config) throttle.Waiter {
				return propLate{(&throttle.Limiter{Limits: []throttle.Limit{{Rate: rate.Limit(c.Limit), Burst: c.Burst}}}).For("k")}
			}, "refund"},
		{"ignores pauses", schedtest.Config{Limit: 10, Burst: 2}, schedtest.Options{Pauses: true},
			func(c schedtest.Config) throttle.Waiter {
				return propDeaf{(&throttle.Limiter{Limits: []throttle.Limit{{Rate: rate.Limit(c.Limit), Burst: c.Burst}}}).For("k")}
			}, "pause"},
		{"ignores windows", schedtest.Config{Limit: 10, Burst: 2}, schedtest.Options{Windows: true},
			func(c schedtest.Config) throttle.Waiter {
				return propDeaf{(&throttle.Limiter{Limits: []throttle.Limit{{Rate: rate.Limit(c.Limit), Burst: c.Burst}}}).For("k")}
			}, "window"},
		{"wedges after a rejection", schedtest.Config{Limit: 10, Burst: 2}, schedtest.Options{Rejects: true},
			func(c schedtest.Config) throttle.Waiter {
				return propSulk{(&throttle.Limiter{Limits: []throttle.Limit{{Rate: rate.Limit(c.Limit), Burst: c.Burst}}}).For("k")}
			}, "no wedge"},
		// Several limits: spending on the first limit only goes over the
		// tokens' limit; chained waiters keep a cancelled wait's units on
		// the limits it had passed (not all or none).
		{"spends on the first limit only", propTokens(10, 2), waits,
			func(c schedtest.Config) throttle.Waiter {
				return propFirstOnly{(&throttle.Limiter{Limits: []throttle.Limit{{Rate: rate.Limit(c.Limit), Burst: c.Burst}}}).For("k")}
			}, "never over"},
		{"limits chained by hand", propTokens(10, 2), waits,
			func(c schedtest.Config) throttle.Waiter {
				x := c.Extra[0]
				return propChained{
					(&throttle.Limiter{Limits: []throttle.Limit{{Rate: rate.Limit(c.Limit), Burst: c.Burst}}}).For("k"),
					(&throttle.Limiter{Limits: []throttle.Limit{{Rate: rate.Limit(x.Limit), Burst: x.Burst}}}).For("k"),
				}
			}, "refund"},
		// A fixed window (epoch-aligned) where the server keeps a sliding
		// log lets up to twice the count through across a boundary; one
		// where the server counts from first use goes over in the
		// server's windows.
		{"a fixed window for a sliding log", propLog(propWindow(10, 2, false)), waits,
			func(c schedtest.Config) throttle.Waiter { return propAsFixed(c) }, "never over"},
		{"an epoch window for a window from first use", propFirst(propWindow(10, 2, false)), waits,
			func(c schedtest.Config) throttle.Waiter { return propAsFixed(c) }, "never over"},
		// x/time/rate: a cancelled reservation's tokens are not all given
		// back when others follow (golang/go#56924), and its deadline
		// error is not context.DeadlineExceeded.
		{"x/time/rate", schedtest.Config{Limit: 10, Burst: 2}, waits,
			func(c schedtest.Config) throttle.Waiter { return rate.NewLimiter(rate.Limit(c.Limit), c.Burst) }, "deadline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			found := map[string]int{}
			for seed := range int64(200) {
				seq := schedtest.Generate(seed, tt.cfg, tt.opt)
				synctest.Test(t, func(t *testing.T) {
					lg := schedtest.Run(t, tt.new(tt.cfg), seq, synctest.Wait)
					for _, v := range schedtest.Violations(seq, lg, propTol) {
						kind, _, _ := strings.Cut(v, ":")
						kind, _, _ = strings.Cut(kind, " (")
						found[kind]++
					}
				})
				if found[tt.want] > 0 {
					t.Logf("caught by seed %d: %v", seed, found)
					return
				}
			}
			t.Errorf("200 sequences found %v; want a %q violation", found, tt.want)
		})
	}
}

// propAsFixed is a Limiter of c whose windows are fixed and aligned to
// the epoch, whatever c says.
func propAsFixed(c schedtest.Config) throttle.Waiter {
	l := &throttle.Limiter{Limits: c.Limits()}
	for i := range l.Limits {
		if k := l.Limits[i].Kind; k == throttle.SlidingLog || k == throttle.FromFirstUse {
			l.Limits[i].Kind = throttle.Fixed
		}
	}
	return l.For("k")
}
