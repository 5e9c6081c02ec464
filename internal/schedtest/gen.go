// Package schedtest is the model-based property suite of the schedule (see
// schedule.go in the throttle package): it generates random sequences of
// operations on one quota — waits of n units (first attempts or retries,
// without a limit, with a deadline, or cancelled after a delay, and settled
// after they went), pauses and their extensions, server windows, bare
// rejections and declared limits —,
// runs them against an implementation of the waiter contract, and checks
// the invariants on what callers saw.
//
// The same suite drives every implementation: the in-process
// [throttle.Limiter] inside testing/synctest bubbles (thousands of
// sequences, exact times, tol 2 ns) and the Redis-backed distributed.Limiter
// on the real clock (fewer, spaced sequences and a tolerance). The package
// uses only time.Now, time.Since, time.Sleep and timers, so it runs
// unchanged in a bubble and on the real clock; it does not import
// testing/synctest: the caller wraps each run in a bubble.
//
// In a bubble (the root package's schedule_prop_test.go):
//
//	seq := schedtest.Generate(seed, cfg, opt)
//	synctest.Test(t, func(t *testing.T) {
//		l := &throttle.Limiter{Limits: cfg.Limits()}
//		lg := schedtest.Run(t, l.For("k"), seq, synctest.Wait)
//		schedtest.Check(t, seq, lg, 2*time.Nanosecond)
//	})
//
// On the real clock (the distributed package, a fresh quota key per
// sequence): ops spaced so that the order of calls is known, a give-up
// that bounds a wedged run, no idle func, and a tolerance for the round
// trip and timer slack:
//
//	opt := schedtest.Options{Ops: 12, Horizon: time.Second, Step: 10 * time.Millisecond,
//		MinGap: 20 * time.Millisecond, GiveUp: 20 * time.Second,
//		Deadlines: true, Cancels: true, Pauses: true, Windows: true, Rejects: true}
//	cfg := schedtest.Config{Limit: 20, Burst: 4}
//	seq := schedtest.Generate(seed, cfg, opt)
//	q := distributed.New(client, fmt.Sprint("prop", seed), cfg.Limits()...)
//	lg := schedtest.Run(t, q.For("k"), seq, nil)
//	schedtest.Check(t, seq, lg, 15*time.Millisecond)
//
// Waits of a count of units need only a [throttle.Waiter]; every other op
// (settles, retries, tries, reservations, costs in further units, pauses,
// feedback) needs a [throttle.Quota]; Run fails the test if an op needs
// what the waiter lacks. Violations returns the
// violations without failing, for shrinking a failing sequence ([Shrink])
// to the ops that matter.
//
// The invariants, each named at the start of its violation's line:
//
//   - never over: the admitted units, replayed in time order through GCRA
//     with the configured (Limit, Burst), or with a declared limit from its
//     op to the next where none is configured, are never early; with
//     settles (Options.Settles), the admissions and the settles replayed
//     through GCRA in time order, each wait's units amended at its
//     settle (never over counting settled costs; see settle.go);
//   - pause: nothing is admitted inside a pause (Pause, or Adapt's Pause);
//   - window: from a window's op to its reset (or the next window's op),
//     no more units are admitted than it said remain;
//   - FIFO: waits that succeed are admitted in call order within a queue,
//     and a retry queued before a first attempt goes no later than it;
//   - refund (sequences of first attempts without feedback): every wait
//     goes by its turn in the ideal FIFO GCRA schedule in which refused
//     waits take no place, failed ones leave when they fail, and settles
//     amend the units of the waits they settle when they come (exact
//     settle: units given back go to the next waits); no wait
//     fails after that turn; no wait is refused whose turn at its call
//     was within its deadline;
//   - no wedge (sequences with feedback): see [Recovery];
//   - deadline, cancel, wedged: a wait ends as its context allows
//     (succeeds by its deadline or cancel, is refused at once with
//     [throttle.ErrWouldExceedDeadline], or fails at its deadline or
//     cancel with the context's error), and never hangs until GiveUp.
package schedtest

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/throttle-go/throttle"
)

// Config is the quota's configured bucket.
type Config struct {
	Limit float64 // units per second; 0: no limit (only pauses and what servers say)
	Burst int     // units at once; 0 means 1
	// Extra: further limits, each in a unit of its own (Limiter.Limits);
	// waits then carry costs in them (Op.Units).
	Extra []ExtraLimit
}

func (c Config) burst() int { return max(c.Burst, 1) }

// Kind is an operation's kind.
type Kind int

const (
	Wait  Kind = iota // WaitN, or Wait of a retry's Cost if Op.Retry, or Try if Op.Try
	Pause             // Pause(ctx, Op.D)
	Adapt             // Observe(ctx, Op.F): a pause, window, rejection or declared limit
)

// Op is one operation, applied At from the run's start.
type Op struct {
	At   time.Duration
	Kind Kind

	// Wait: N units, in the retry queue if Retry; Deadline (from the
	// call) or Cancel (after the call), 0 for none. Try: Try instead,
	// checked as a wait whose deadline is its call (it goes at once or
	// is refused at once, taking no place). Reserve: ReserveN then the
	// Reservation's Wait, its Cancel at Cancel.
	N        int
	Retry    bool
	Class    throttle.Priority // a first attempt's class (WithPriority)
	Try      bool
	Reserve  bool
	Deadline time.Duration
	Cancel   time.Duration
	// Settle: SettleAfter after a wait that succeeded, its cost is
	// settled as Actual units (Quota.Settle); 0 for no settle.
	SettleAfter time.Duration
	Actual      int
	// ActualUnits: with Units, the settle is the wait's Cost settled as
	// Actual and these per unit.
	ActualUnits []int
	// Units: the wait's cost in each of Config.Extra, by index (Wait of a Cost);
	// nil: WaitN, nothing of them.
	Units []int

	// Pause.
	D time.Duration

	// Adapt.
	F throttle.Feedback
}

// pause returns how long the op pauses the quota, 0 if it does not.
func (o Op) pause() time.Duration {
	switch {
	case o.Kind == Pause:
		return o.D
	case o.Kind == Adapt:
		return o.F.Pause
	}
	return 0
}

func (o Op) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v ", o.At)
	switch o.Kind {
	case Wait:
		q := "WaitN"
		if o.Retry {
			q = "Wait(Retry)"
		}
		if o.Try {
			q = "Try"
		}
		if o.Reserve {
			q = "ReserveN+Wait"
		}
		if o.Units != nil {
			q = "Wait"
			if o.Retry {
				q = "Wait(Retry)"
			}
			if o.Try {
				q = "Try"
			}
			fmt.Fprintf(&b, "%s(%d, %v)", q, o.N, o.Units)
		} else {
			fmt.Fprintf(&b, "%s(%d)", q, o.N)
		}
		if o.Class != throttle.PriorityDefault {
			fmt.Fprintf(&b, " %v", o.Class)
		}
		if o.Deadline > 0 {
			fmt.Fprintf(&b, " deadline %v", o.Deadline)
		}
		if o.Cancel > 0 {
			fmt.Fprintf(&b, " cancel after %v", o.Cancel)
		}
		if o.SettleAfter > 0 {
			fmt.Fprintf(&b, " settled as %d %v after %v", o.Actual, o.ActualUnits, o.SettleAfter)
		}
	case Pause:
		fmt.Fprintf(&b, "Pause(%v)", o.D)
	case Adapt:
		f := o.F
		b.WriteString("Observe{")
		if f.Verdict != throttle.Answered {
			fmt.Fprintf(&b, "Verdict: %v, ", f.Verdict)
		}
		if f.Pause > 0 {
			fmt.Fprintf(&b, "Pause: %v, ", f.Pause)
		}
		if w := f.Window; w != nil {
			fmt.Fprintf(&b, "Window: {Remaining: %v, Reset: %v, Size: %v, Length: %v}, ", w.Remaining, w.Reset, w.Size, w.Length)
		}
		if f.Age > 0 {
			fmt.Fprintf(&b, "Age: %v, ", f.Age)
		}
		if f.Available != nil {
			fmt.Fprintf(&b, "Available: %v, ", *f.Available)
		}
		if d := f.Declared; d != nil {
			fmt.Fprintf(&b, "Declared: {Rate: %v, Burst: %d}, ", d.Rate, d.Burst)
		}
		fmt.Fprintf(&b, "Spent: %d}", f.Spent)
	}
	return b.String()
}

// Sequence is one generated sequence: its seed, the quota's bucket and the
// operations in the order of their offsets.
type Sequence struct {
	Seed   int64
	Config Config
	Ops    []Op
	// GiveUp: a wait still waiting this long after the last op is
	// cancelled and reported as wedged.
	GiveUp time.Duration
}

func (s Sequence) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d, limit %v/s, burst %d%s, %d ops:", s.Seed, s.Config.Limit, s.Config.Burst, s.Config.extraString(), len(s.Ops))
	for i, o := range s.Ops {
		fmt.Fprintf(&b, "\n\t%2d: %v", i, o)
	}
	return b.String()
}

// feedback reports whether the sequence tells the quota anything besides
// its waits.
func (s Sequence) feedback() bool {
	for _, o := range s.Ops {
		if o.Kind != Wait {
			return true
		}
	}
	return false
}

// Options choose what Generate produces. The zero Options give 20 waits of
// first attempts without deadlines within 2 s.
type Options struct {
	Ops     int           // operations per sequence; 0 means 20
	Horizon time.Duration // the ops fall within it; 0 means 2 s
	// Step: offsets, delays and durations are multiples of it (so that
	// ops meet turns exactly in a bubble); 0 means 1 ms.
	Step time.Duration
	// MinGap: consecutive ops are at least this far apart; 0 lets several
	// ops share an instant (fine in a bubble with an idle func; on the
	// real clock use a few ms, so that the order of calls is known).
	MinGap time.Duration
	// GiveUp: see Sequence; 0 means 1 h.
	GiveUp time.Duration

	Retries   bool // some waits are retries (Cost.Retry)
	Classes   bool // first attempts in the three classes (throttle.WithPriority)
	Tries     bool // some waits are Try
	Reserves  bool // some waits are ReserveN and the Reservation's Wait
	Deadlines bool // some waits have a deadline
	Cancels   bool // some waits are cancelled after a delay
	Pauses    bool // Pause and Observe{Pause}, some extending the last
	Windows   bool // Observe{Window}
	Rejects   bool // Observe{Verdict: RefusedBare}
	Declares  bool // Observe{Declared}: only for a Config without a limit
	// Settles: some waits that succeed are settled (Quota.Settle) a
	// while after, as 0 to twice their units: only for a Config with a
	// limit.
	Settles bool
}

// sameWindow is schedule.go's sameWindow: resets closer than this are
// one window to the schedule.
const sameWindow = 2500 * time.Millisecond

// Generate returns the sequence of seed for cfg.
func Generate(seed int64, cfg Config, opt Options) Sequence {
	r := rand.New(rand.NewPCG(uint64(seed), 0x7468726f74746c65))
	nOps := opt.Ops
	if nOps == 0 {
		nOps = 20
	}
	horizon := opt.Horizon
	if horizon == 0 {
		horizon = 2 * time.Second
	}
	step := opt.Step
	if step == 0 {
		step = time.Millisecond
	}
	giveUp := opt.GiveUp
	if giveUp == 0 {
		giveUp = time.Hour
	}
	steps := func(lo, hi time.Duration) time.Duration { // a multiple of step in [lo, hi]
		a, b := int64(lo/step), int64(hi/step)
		if b <= a {
			return time.Duration(a) * step
		}
		return time.Duration(a+r.Int64N(b-a+1)) * step
	}
	var kinds []string
	if opt.Pauses {
		kinds = append(kinds, "pause")
	}
	if opt.Windows {
		kinds = append(kinds, "window")
	}
	if opt.Rejects {
		kinds = append(kinds, "reject")
	}
	if opt.Declares && cfg.Limit == 0 {
		kinds = append(kinds, "declare")
	}
	maxN := cfg.burst()
	if cfg.Limit == 0 {
		maxN = 3
	}
	cost := func() int {
		if r.IntN(2) == 0 {
			return 1
		}
		return 1 + r.IntN(maxN)
	}
	// A turn is about this far apart: delays and durations scale with it.
	unit := 100 * time.Millisecond
	if cfg.Limit > 0 {
		unit = min(max(time.Duration(float64(time.Second)/cfg.Limit), step), time.Second)
	}
	mean := horizon / time.Duration(nOps)
	s := Sequence{Seed: seed, Config: cfg, GiveUp: giveUp}
	var at, pauseEnd time.Duration
	var winEnd, winLen time.Duration // the last window told
	var winLeft, winSize float64
	for i := range nOps {
		if i > 0 {
			gap := steps(0, 2*mean)
			if r.IntN(4) == 0 {
				gap = 0 // several ops at once
			}
			at += max(gap, opt.MinGap)
		}
		o := Op{At: at, Kind: Wait}
		if len(kinds) > 0 && r.IntN(3) == 0 {
			switch kinds[r.IntN(len(kinds))] {
			case "pause":
				d := steps(step, 3*unit+500*time.Millisecond)
				if pauseEnd > at && r.IntN(2) == 0 {
					// An extension: the pause ends later than the last.
					d = pauseEnd - at + steps(0, 2*unit)
				}
				if r.IntN(2) == 0 {
					o.Kind, o.D = Pause, d
				} else {
					// Half of them a refusal's (a 429 with Retry-After),
					// which also trims a known limit's pace.
					o.Kind, o.F = Adapt, throttle.Feedback{Pause: d}
					if r.IntN(2) == 0 {
						o.F.Verdict = throttle.Refused
					}
				}
				pauseEnd = max(pauseEnd, at+d)
			case "window":
				// A server's windows: the same window again (its reset,
				// fewer units left), or the next one, whose reset is at
				// least sameWindow after the last (resets closer than that
				// are one window to the schedule: whole-second dialects).
				f := &throttle.ServerWindow{}
				if winEnd > at && r.IntN(2) == 0 {
					f.Remaining = float64(r.IntN(int(winLeft) + 1))
					f.Reset, f.Size, f.Length = winEnd-at, winSize, winLen
				} else {
					f.Remaining = float64(r.IntN(2*maxN + 2))
					f.Reset = steps(step, 2*time.Second)
					if winEnd > 0 {
						f.Reset = max(f.Reset, winEnd+sameWindow+step-at)
					}
					if r.IntN(2) == 0 {
						f.Size = f.Remaining + float64(r.IntN(20))
						f.Length = max(f.Reset+steps(0, time.Second), 2*sameWindow)
					}
				}
				winEnd, winLeft, winSize, winLen = at+f.Reset, f.Remaining, f.Size, f.Length
				o.Kind, o.F = Adapt, throttle.Feedback{Window: f}
			case "reject":
				o.Kind, o.F = Adapt, throttle.Feedback{Verdict: throttle.RefusedBare, Spent: cost(), Age: steps(0, 2*unit)}
			case "declare":
				lims := []rate.Limit{2, 5, 10, 50}
				// A declared burst holds the largest cost: a wait of more
				// units than the burst conforms to no bucket.
				o.Kind, o.F = Adapt, throttle.Feedback{Declared: &throttle.Declared{Rate: lims[r.IntN(len(lims))], Burst: maxN + r.IntN(4)}}
				if r.IntN(2) == 0 {
					// A refilling bucket's level, which caps the key's.
					a := float64(r.IntN(o.F.Declared.Burst + 1))
					o.F.Available = &a
				}
			}
			s.Ops = append(s.Ops, o)
			continue
		}
		o.N = cost()
		o.Retry = opt.Retries && r.IntN(4) == 0
		switch k := r.IntN(4); {
		case k == 0 && opt.Deadlines:
			o.Deadline = steps(step, 4*unit)
		case k == 1 && opt.Cancels:
			o.Cancel = steps(step, 4*unit)
		case k == 2 && opt.Tries:
			o.Try, o.Retry = true, false
		}
		if opt.Reserves && !o.Try && r.IntN(3) == 0 {
			o.Reserve, o.Retry = true, false
		}
		if opt.Classes && !o.Retry {
			o.Class = []throttle.Priority{throttle.PriorityDefault, throttle.PriorityCritical, throttle.PriorityBackground}[r.IntN(3)]
		}
		if len(cfg.Extra) > 0 && !o.Reserve && (!o.Retry || r.IntN(2) == 0) {
			o.Units = extraCosts(r, cfg.Extra)
		}
		if opt.Settles && cfg.Limit > 0 && len(cfg.Extra) == 0 && r.IntN(2) == 0 {
			o.SettleAfter, o.Actual = steps(step, 3*unit), r.IntN(2*o.N+1)
		}
		if opt.Settles && o.Units != nil && !o.Try && r.IntN(2) == 0 {
			// Settled in every unit: 0 to twice the cost.
			o.SettleAfter, o.Actual = steps(step, 3*unit), o.N
			if cfg.Limit > 0 {
				o.Actual = r.IntN(2*o.N + 1)
			}
			o.ActualUnits = make([]int, len(o.Units))
			for L, n := range o.Units {
				o.ActualUnits[L] = r.IntN(2*n + 1)
			}
		}
		s.Ops = append(s.Ops, o)
	}
	return s
}
