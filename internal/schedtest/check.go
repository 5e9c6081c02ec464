package schedtest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/throttle-go/throttle"
)

// Recovery is the no-wedge bound's recovery time: once the last pause
// has ended, the last window reset and the last rejection or declared
// limit come, every
// queued wait is admitted within Recovery plus two intervals of the
// configured pace (a lone rejection shifts the schedule by two) plus its
// position at the pace in force. A cut regrows to the configured limit in
// 2 s (schedule.go's cutRecover); the half second is slack for its last
// step.
const Recovery = 2500 * time.Millisecond

// probePeriod is schedule.go's probeWait: after a window's reset with no
// new window told, a probe goes per probePeriod. A ticket may need two
// probes (probes carry the key's largest cost; a ticket goes whole).
const probePeriod = time.Second

// Check reports, through t.Errorf, every invariant that lg violates: the
// sequence (with its seed) and what each op did are in the message. tol is
// how far apart two times may be and still count as equal: 1 ns in a
// bubble (rounding of the schedule's float64 nanoseconds), a few
// milliseconds on the real clock. It reports whether all held.
func Check(t testing.TB, seq Sequence, lg Log, tol time.Duration) bool {
	t.Helper()
	v := Violations(seq, lg, tol)
	if len(v) == 0 {
		return true
	}
	if len(v) > 8 {
		v = append(v[:8], fmt.Sprintf("… and %d more", len(v)-8))
	}
	t.Errorf("%s\nviolates:\n\t%s", Describe(seq, lg), strings.Join(v, "\n\t"))
	return false
}

// Describe returns seq with what each op did in lg.
func Describe(seq Sequence, lg Log) string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d, limit %v/s, burst %d%s, %d ops:", seq.Seed, seq.Config.Limit, seq.Config.Burst, seq.Config.extraString(), len(seq.Ops))
	for i, o := range seq.Ops {
		fmt.Fprintf(&b, "\n\t%2d: %v", i, o)
		if i < len(lg.Results) {
			r := lg.Results[i]
			if o.Kind == Wait {
				fmt.Fprintf(&b, " → called %v, returned %v", r.Call, r.Return)
			} else {
				fmt.Fprintf(&b, " → applied %v", r.Call)
			}
			if r.Err != nil {
				fmt.Fprintf(&b, ": %v", r.Err)
			}
		}
	}
	return b.String()
}

// checker holds one sequence's log in float64 nanoseconds.
type checker struct {
	seq   Sequence
	lg    Log
	tol   float64
	waits []int   // indices of the wait ops, in the order of their calls
	am    []amend // the settles that took effect, in time order
	bad   []string
}

func (c *checker) errorf(format string, args ...any) {
	c.bad = append(c.bad, fmt.Sprintf(format, args...))
}

func ns(d time.Duration) float64 { return float64(d) }

func (c *checker) call(i int) float64 { return ns(c.lg.Results[i].Call) }
func (c *checker) ret(i int) float64  { return ns(c.lg.Results[i].Return) }
func (c *checker) ok(i int) bool {
	r := c.lg.Results[i]
	return r.Err == nil && !r.GaveUp
}

// before reports whether wait i was called before wait j, as far as the
// log tells.
func (c *checker) before(i, j int) bool {
	ci, cj := c.call(i), c.call(j)
	return ci+c.tol < cj || (c.lg.Ordered && ci == cj && i < j)
}

// refused reports whether wait i was refused at its reservation.
func (c *checker) refused(i int) bool {
	r := c.lg.Results[i]
	return errors.Is(r.Err, throttle.ErrWouldExceedDeadline) && c.ret(i) <= c.call(i)+c.tol
}

// Violations returns a line for every invariant lg violates; see Check.
func Violations(seq Sequence, lg Log, tol time.Duration) []string {
	// A try is checked as a wait whose deadline is its call (within
	// tol): it goes at once, or is refused at once only if its turn in
	// the ideal schedule is later than its call.
	if slices.ContainsFunc(seq.Ops, func(o Op) bool { return o.Try }) {
		lg.Results = slices.Clone(lg.Results)
		for i, o := range seq.Ops {
			if o.Kind == Wait && o.Try {
				lg.Results[i].Deadline = lg.Results[i].Call + max(tol, 1)
			}
		}
	}
	c := &checker{seq: seq, lg: lg, tol: ns(tol)}
	for i, o := range seq.Ops {
		if o.Kind == Wait {
			c.waits = append(c.waits, i)
		} else if err := lg.Results[i].Err; err != nil {
			c.errorf("op %d failed: %v", i, err)
		}
	}
	slices.SortStableFunc(c.waits, func(i, j int) int {
		return int(lg.Results[i].Call - lg.Results[j].Call)
	})
	c.am = c.amends()
	c.neverOver()
	c.pauses()
	c.windows()
	c.fifo()
	c.contexts()
	c.neverOverExtra()
	// Retries and classes change the order from the calls': the ideal
	// FIFO schedule is not theirs.
	retries := slices.ContainsFunc(seq.Ops, func(o Op) bool { return o.Retry || o.Class != throttle.PriorityDefault })
	switch {
	case retries && !seq.feedback() && !seq.charges() && len(seq.Config.Extra) == 0 && seq.Config.Limit > 0:
		c.noIdle()
	case seq.feedback() || retries:
	case len(seq.Config.Extra) > 0 && seq.settlesUnits():
		// Settled units move the turns of every limit: never over per
		// limit counting them (neverOverExtra) is what holds.
	case len(seq.Config.Extra) > 0:
		c.conserveExtra()
	default:
		c.conserve()
	}
	if seq.feedback() {
		c.noWedge()
	}
	return c.bad
}

// admitted returns the waits that succeeded, in the order of their
// returns.
func (c *checker) admitted() []int {
	var a []int
	for _, i := range c.waits {
		if c.ok(i) {
			a = append(a, i)
		}
	}
	slices.SortStableFunc(a, func(i, j int) int { return int(c.lg.Results[i].Return - c.lg.Results[j].Return) })
	return a
}

// gcra replays the admissions adm (in time order) through a bucket of
// interval and burst, and reports the first one it does not allow.
func (c *checker) gcra(adm []int, interval, burst float64, what string) {
	tau := burst * interval
	tat := math.Inf(-1)
	for _, i := range adm {
		t, n := c.ret(i), float64(c.seq.Ops[i].N)
		if early := tat + n*interval - tau; t+c.tol < early {
			c.errorf("never over (%s): wait %d admitted %v units at %v; the bucket allows them from %v",
				what, i, n, time.Duration(t), time.Duration(early))
			return
		}
		tat = max(tat, t) + n*interval
	}
}

// neverOver: the admissions conform to the configured bucket, or where
// none is configured to the declared one in force.
func (c *checker) neverOver() {
	adm := c.admitted()
	cfg := c.seq.Config
	if cfg.Limit > 0 {
		what := fmt.Sprintf("%v/s burst %d", cfg.Limit, cfg.burst())
		if len(c.am) > 0 {
			c.ledger(adm, c.am, 1e9/cfg.Limit, float64(cfg.burst()), what, func(i int) float64 { return float64(c.seq.Ops[i].N) })
			return
		}
		c.gcra(adm, 1e9/cfg.Limit, float64(cfg.burst()), what)
		return
	}
	// A declared limit applies from its op until the next: the bucket is
	// full when it is declared.
	for k, o := range c.seq.Ops {
		if o.Kind != Adapt || o.F.Declared == nil || o.F.Declared.Rate <= 0 {
			continue
		}
		lo, hi := ns(c.lg.Results[k].Return)+c.tol, math.Inf(1)
		for k2 := k + 1; k2 < len(c.seq.Ops); k2++ {
			if o2 := c.seq.Ops[k2]; o2.Kind == Adapt && o2.F.Declared != nil {
				hi = c.call(k2) - c.tol
				break
			}
		}
		var seg []int
		for _, i := range adm {
			if t := c.ret(i); t > lo && t < hi {
				seg = append(seg, i)
			}
		}
		d := o.F.Declared
		c.gcra(seg, 1e9/float64(d.Rate), float64(max(d.Burst, 1)),
			fmt.Sprintf("declared %v/s burst %d by op %d", d.Rate, d.Burst, k))
	}
}

// pauses: nothing is admitted inside a pause.
func (c *checker) pauses() {
	for k, o := range c.seq.Ops {
		d := o.pause()
		if d <= 0 {
			continue
		}
		lo, hi := c.ret(k)+c.tol, c.call(k)+ns(d)-c.tol
		for _, i := range c.waits {
			if t := c.ret(i); c.ok(i) && t > lo && t < hi {
				c.errorf("pause: wait %d admitted at %v, inside op %d's pause (%v to %v)",
					i, time.Duration(t), k, time.Duration(c.call(k)), time.Duration(c.call(k)+ns(d)))
			}
		}
	}
}

// windows: from a window's op to its reset (or the next window's op), no
// more units are admitted than it said remain.
func (c *checker) windows() {
	for k, o := range c.seq.Ops {
		if o.Kind != Adapt || o.F.Window == nil {
			continue
		}
		lo, hi := c.ret(k)+c.tol, c.call(k)+ns(o.F.Window.Reset)
		for k2 := k + 1; k2 < len(c.seq.Ops); k2++ {
			if o2 := c.seq.Ops[k2]; o2.Kind == Adapt && o2.F.Window != nil {
				hi = min(hi, c.call(k2))
				break
			}
		}
		hi -= c.tol
		units := 0
		var who []int
		for _, i := range c.waits {
			if t := c.ret(i); c.ok(i) && t > lo && t < hi {
				units += c.seq.Ops[i].N
				who = append(who, i)
			}
		}
		if float64(units) > o.F.Window.Remaining {
			c.errorf("window: %d units admitted (waits %v) in (%v, %v), where op %d said %v remain",
				units, who, time.Duration(lo), time.Duration(hi), k, o.F.Window.Remaining)
		}
	}
}

// noIdle: the exact refunds where the order is not the calls' (retries,
// classes): each admission, in time order, comes as soon as the bucket
// allows its units after the admissions before it, or at its call, or at
// the last departure before it (an admission, or a queued wait that
// failed: it may have waited behind a larger ticket, until that went or
// was cancelled), whichever is latest. A refund lost (a cancelled wait's
// units kept) or a key idle with waits queued makes an admission later.
func (c *checker) noIdle() {
	interval := 1e9 / c.seq.Config.Limit
	tau := float64(c.seq.Config.burst()) * interval
	tat := math.Inf(-1)
	for _, i := range c.admitted() {
		n, ret := float64(c.seq.Ops[i].N), c.ret(i)
		prev := math.Inf(-1) // the last departure from the queue by then
		for _, j := range c.waits {
			if t := c.ret(j); j != i && !c.refused(j) && t <= ret {
				prev = max(prev, t)
			}
		}
		bound := max(tat+n*interval-tau, c.call(i), prev)
		if ret > bound+c.tol {
			c.errorf("refund: wait %d admitted at %v; its units were free at %v (the bucket after the admissions before it, its call, the last wait to leave the queue before it)",
				i, time.Duration(ret), time.Duration(bound))
		}
		tat = max(tat, ret) + n*interval
	}
}

// fifo: waits that succeeded are admitted in the order of their calls
// within each queue (the retries', each class's), and a retry queued
// before a first attempt goes no later than it.
func (c *checker) fifo() {
	for _, a := range c.waits {
		for _, b := range c.waits {
			if !c.ok(a) || !c.ok(b) || !c.before(a, b) {
				continue
			}
			oa, ob := c.seq.Ops[a], c.seq.Ops[b]
			if (oa.Retry || !ob.Retry && oa.Class == ob.Class) && c.ret(a) > c.ret(b)+c.tol {
				c.errorf("FIFO: wait %d (called %v) admitted at %v, after wait %d (called %v) at %v",
					a, time.Duration(c.call(a)), time.Duration(c.ret(a)), b, time.Duration(c.call(b)), time.Duration(c.ret(b)))
			}
		}
	}
}

// contexts: a wait ends as its context allows: one without a deadline or
// cancel succeeds; one with a deadline succeeds by it, is refused at once,
// or fails at it with a deadline error; a cancelled one succeeds before
// its cancel or fails at it with context.Canceled.
func (c *checker) contexts() {
	// Without feedback or retries (which go ahead of first attempts), a
	// turn never moves later: a wait is refused at once or not at all.
	// A charge settled moves turns later too.
	// A class's wait may go ahead of another class's queued before it.
	fb := c.seq.feedback() || c.seq.charges() || slices.ContainsFunc(c.seq.Ops, func(o Op) bool { return o.Retry || o.Class != throttle.PriorityDefault })
	for _, i := range c.waits {
		r := c.lg.Results[i]
		call, ret, dl, cn := c.call(i), c.ret(i), ns(r.Deadline), ns(r.Cancel)
		switch {
		case r.GaveUp:
			c.errorf("wedged: wait %d (called %v) still waiting at %v", i, r.Call, r.Return)
		case r.Err == nil && r.Deadline > 0 && ret > dl+c.tol:
			c.errorf("deadline: wait %d succeeded at %v, after its deadline %v", i, r.Return, r.Deadline)
		case r.Err == nil && r.Cancel > 0 && ret > cn+c.tol:
			c.errorf("cancel: wait %d succeeded at %v, after its cancel at %v", i, r.Return, r.Cancel)
		case r.Err == nil:
		case r.Deadline > 0 && !errors.Is(r.Err, context.DeadlineExceeded):
			c.errorf("deadline: wait %d failed with %q, not a deadline error", i, r.Err)
		case errors.Is(r.Err, throttle.ErrWouldExceedDeadline):
			if ret > call+c.tol && !fb {
				c.errorf("deadline: wait %d (called %v) refused at %v, not at once, with no feedback or retry to move its turn", i, r.Call, r.Return)
			}
			if ret > dl+c.tol {
				c.errorf("deadline: wait %d refused at %v, after its deadline %v", i, r.Return, r.Deadline)
			}
		case r.Deadline > 0 && (ret < dl-c.tol || ret > dl+c.tol):
			c.errorf("deadline: wait %d failed with %q at %v, its deadline was %v", i, r.Err, r.Return, r.Deadline)
		case r.Deadline > 0:
		case r.Cancel > 0 && !errors.Is(r.Err, context.Canceled):
			c.errorf("cancel: wait %d failed with %q, not context.Canceled", i, r.Err)
		case r.Cancel > 0 && (ret < cn-c.tol || ret > cn+c.tol):
			c.errorf("cancel: wait %d failed at %v, cancelled at %v", i, r.Return, r.Cancel)
		case r.Cancel == 0:
			c.errorf("wait %d (no deadline, no cancel) failed: %v", i, r.Err)
		}
	}
}
