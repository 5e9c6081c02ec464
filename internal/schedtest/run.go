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
}

var errGaveUp = errors.New("schedtest: gave up")

// Run applies seq's ops to w, each at its offset from now, and returns
// what each did once every wait has returned. A wait runs in a goroutine
// of its own; the other ops run on the caller's. w must implement
// [throttle.RetryWaiter], [throttle.Pauser] and [throttle.Adapter] as far
// as seq uses them (Run fails t otherwise).
//
// idle, if not nil, is called after each op is started and before the
// next: synctest.Wait in a bubble, so that ops at one instant take effect
// in their order. Pass nil on the real clock.
func Run(t testing.TB, w throttle.Waiter, seq Sequence, idle func()) Log {
	t.Helper()
	rw, _ := w.(throttle.RetryWaiter)
	pw, _ := w.(throttle.Pauser)
	aw, _ := w.(throttle.Adapter)
	tw, _ := w.(throttle.Trier)
	sw, _ := w.(throttle.Reserver)
	stw, _ := w.(throttle.Settler)
	cw, _ := w.(throttle.CostWaiter)
	ctw, _ := w.(throttle.CostTrier)
	for i, o := range seq.Ops {
		switch {
		case o.Kind == Wait && o.Reserve && sw == nil:
			t.Fatalf("op %d: %T does not implement throttle.Reserver", i, w)
		case o.Kind == Wait && o.Try && tw == nil:
			t.Fatalf("op %d: %T does not implement throttle.Trier", i, w)
		case o.Kind == Wait && o.SettleAfter > 0 && stw == nil:
			t.Fatalf("op %d: %T does not implement throttle.Settler", i, w)
		case o.Kind == Wait && o.Units != nil && o.Try && ctw == nil:
			t.Fatalf("op %d: %T does not implement throttle.CostTrier", i, w)
		case o.Kind == Wait && o.Units != nil && !o.Try && cw == nil:
			t.Fatalf("op %d: %T does not implement throttle.CostWaiter", i, w)
		case o.Kind == Wait && o.Retry && rw == nil:
			t.Fatalf("op %d: %T does not implement throttle.RetryWaiter", i, w)
		case o.Kind == Pause && pw == nil:
			t.Fatalf("op %d: %T does not implement throttle.Pauser", i, w)
		case o.Kind == Adapt && aw == nil:
			t.Fatalf("op %d: %T does not implement throttle.Adapter", i, w)
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
					if rv, res.Err = sw.ReserveN(ctx, o.N); res.Err != nil {
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
						ok, d, err = ctw.TryCost(ctx, seq.Config.cost(o))
					} else {
						ok, d, err = tw.TryN(ctx, o.N)
					}
					if res.Err = err; err == nil && !ok {
						res.Err = &throttle.DeadlineError{Delay: d}
					}
				case o.Units != nil:
					res.Err = cw.WaitCost(ctx, seq.Config.cost(o))
				case o.Retry:
					res.Err = rw.WaitRetryN(ctx, o.N)
				default:
					res.Err = w.WaitN(ctx, o.N)
				}
				res.Return = since()
				res.GaveUp = res.Err != nil && errors.Is(context.Cause(ctx), errGaveUp)
				if res.Err == nil && o.SettleAfter > 0 {
					time.Sleep(o.SettleAfter)
					res.Settled, res.SettleAt = true, since()
					if o.ActualUnits != nil {
						res.SettleErr = stw.(throttle.CostSettler).SettleCost(context.Background(), seq.Config.cost(o), seq.Config.actual(o))
					} else {
						res.SettleErr = stw.Settle(context.Background(), o.N, o.Actual)
					}
				}
			}()
		case Pause:
			res.Call = since()
			res.Err = pw.Pause(context.Background(), o.D)
			res.Return = since()
		case Adapt:
			res.Call = since()
			res.Err = aw.Adapt(context.Background(), o.F)
			res.Return = since()
		}
		if idle != nil {
			idle()
		}
	}
	wg.Wait()
	return lg
}
