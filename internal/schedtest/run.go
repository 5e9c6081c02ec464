package schedtest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/throttle-go/throttle"
)

// Result is what one op did, times as offsets from the run's start.
type Result struct {
	// Call and Return: when the call began and returned (for a wait, its
	// admission if Err is nil).
	Call, Return time.Duration
	Err          error
	// Deadline and Cancel: when the wait's context was to end, 0 if
	// never.
	Deadline, Cancel time.Duration
	GaveUp           bool // cancelled at the sequence's GiveUp: wedged
	// Settled: the wait was settled (Op.SettleAfter) at SettleAt, with
	// SettleErr.
	Settled   bool
	SettleAt  time.Duration
	SettleErr error
}

// Log is what a run recorded: Results[i] is Ops[i]'s.
type Log struct {
	Results []Result
	// Ordered: calls at the same instant were made in the order of the
	// ops (Run had an idle func).
	Ordered bool
	// Start: when the run started (offsets count from it): windows
	// aligned to the Unix epoch are counted from it.
	Start time.Time
	// Stall: on the real clock (Run without an idle func), the longest a
	// timer of the run's process fired late while it ran (a 2 ms ticker):
	// a process stalled that long may have seen its calls and returns
	// that much after they happened, which the checker's tolerance does
	// not cover: such a run shows nothing, either way.
	Stall time.Duration
}

var errGaveUp = errors.New("schedtest: gave up")

// Run applies seq's ops to w, each at its offset from now, and returns
// what each did once every wait has returned. A wait runs in a goroutine
// of its own; the other ops run on the caller's. Waits of a count of
// units (Op.N alone) need only a [throttle.Waiter] (a *rate.Limiter is
// one); every other op needs w to be a [throttle.Quota] (Run fails t
// otherwise).
//
// idle, if not nil, is called after each op is started and before the
// next: synctest.Wait in a bubble, so that ops at one instant take effect
// in their order. Pass nil on the real clock.
func Run(t testing.TB, w throttle.Waiter, seq Sequence, idle func()) Log {
	t.Helper()
	q, _ := w.(throttle.Quota)
	for i, o := range seq.Ops {
		plain := o.Kind == Wait && !o.Reserve && !o.Try && o.SettleAfter == 0 && o.Units == nil && !o.Retry
		if !plain && q == nil {
			t.Fatalf("op %d (%v): %T is not a throttle.Quota", i, o, w)
		}
	}
	lg := Log{Results: make([]Result, len(seq.Ops)), Ordered: idle != nil}
	start := time.Now()
	lg.Start = start
	since := func() time.Duration { return time.Since(start) }
	// Every wait's context derives from base, which gives up on waits
	// still waiting GiveUp after the last op.
	base, giveUp := context.WithCancelCause(context.Background())
	defer giveUp(nil)
	var last time.Duration
	if len(seq.Ops) > 0 {
		last = seq.Ops[len(seq.Ops)-1].At
	}
	stop := time.AfterFunc(last+seq.GiveUp, func() { giveUp(errGaveUp) })
	defer stop.Stop()

	var wg sync.WaitGroup
	stopMon := func() {}
	if idle == nil {
		done := make(chan struct{})
		var mon sync.WaitGroup
		mon.Go(func() { lg.Stall = stalls(done) })
		stopMon = func() { close(done); mon.Wait() }
	}
	for i, o := range seq.Ops {
		if d := o.At - since(); d > 0 {
			time.Sleep(d)
		}
		res := &lg.Results[i]
		switch o.Kind {
		case Wait:
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithCancel(base)
				if o.Class != throttle.PriorityDefault {
					ctx = throttle.WithPriority(ctx, o.Class)
				}
				defer cancel()
				res.Call = since()
				if o.Deadline > 0 {
					res.Deadline = res.Call + o.Deadline
					var c context.CancelFunc
					ctx, c = context.WithDeadline(ctx, start.Add(res.Deadline))
					defer c()
				}
				if o.Cancel > 0 && !o.Reserve {
					res.Cancel = res.Call + o.Cancel
					tm := time.AfterFunc(o.Cancel, cancel)
					defer tm.Stop()
				}
				switch {
				case o.Reserve:
					var rv throttle.Reservation
					if rv, res.Err = q.ReserveN(ctx, o.N); res.Err != nil {
						break
					}
					if o.Cancel > 0 { // through the Reservation, not ctx
						res.Cancel = res.Call + o.Cancel
						tm := time.AfterFunc(res.Cancel-since(), rv.Cancel)
						defer tm.Stop()
					}
					res.Err = rv.Wait(ctx)
				case o.Try:
					// A refusal is recorded as a wait's at its deadline.
					ok, d, err := false, time.Duration(0), error(nil)
					if o.Units != nil {
						ok, d, err = q.Try(ctx, seq.Config.cost(o))
					} else {
						ok, d, err = q.Try(ctx, throttle.Cost{N: o.N})
					}
					if res.Err = err; err == nil && !ok {
						res.Err = &throttle.DeadlineError{Delay: d}
					}
				case o.Units != nil:
					res.Err = q.Wait(ctx, seq.Config.cost(o))
				case o.Retry:
					res.Err = q.Wait(ctx, throttle.Cost{N: o.N, Retry: true})
				default:
					res.Err = w.WaitN(ctx, o.N)
				}
				res.Return = since()
				res.GaveUp = res.Err != nil && errors.Is(context.Cause(ctx), errGaveUp)
				if res.Err == nil && o.SettleAfter > 0 {
					time.Sleep(o.SettleAfter)
					res.Settled, res.SettleAt = true, since()
					if o.ActualUnits != nil {
						res.SettleErr = q.Settle(context.Background(), seq.Config.cost(o), seq.Config.actual(o))
					} else {
						res.SettleErr = q.Settle(context.Background(), throttle.Cost{N: o.N}, throttle.Cost{N: o.Actual})
					}
				}
			}()
		case Pause:
			res.Call = since()
			res.Err = q.Pause(context.Background(), o.D)
			res.Return = since()
		case Adapt:
			res.Call = since()
			_, res.Err = q.Observe(context.Background(), o.F)
			res.Return = since()
		}
		if idle != nil {
			idle()
		}
	}
	wg.Wait()
	stopMon()
	return lg
}

// stalls returns the longest a 2 ms ticker fired late until done closes.
func stalls(done <-chan struct{}) time.Duration {
	const tick = 2 * time.Millisecond
	tk := time.NewTicker(tick)
	defer tk.Stop()
	var worst time.Duration
	last := time.Now()
	for {
		select {
		case <-done:
			return worst
		case now := <-tk.C:
			worst = max(worst, now.Sub(last)-tick)
			last = now
		}
	}
}
