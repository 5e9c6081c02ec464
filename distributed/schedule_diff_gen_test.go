package distributed

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/throttle-go/throttle/internal/schedule"
)

// The differential suite's generator: random configurations, and random
// op sequences on them with valid arguments, as the Limiter's calls would
// send them (see schedule_diff_test.go).

// dcfg is a key's configuration: the first limit's interval (µs per unit,
// 0: none) and burst, and the further limits.
type dcfg struct {
	iv    float64
	burst int
	lims  []dlim
	ver   int // the Limiter's Version: a higher one replaces the state's configuration
}

// burstArg is the script's ARGV[3]: the burst, and ":version" after it
// when there is a Version.
func (c dcfg) burstArg() string {
	if c.ver == 0 {
		return strconv.Itoa(c.burst)
	}
	return strconv.Itoa(c.burst) + ":" + strconv.Itoa(c.ver)
}

// dlim is a further limit as the script's spec says it: kind (a
// schedule.Kind*), p the bucket's interval or the window's length in µs,
// n its burst or count.
type dlim struct {
	kind int
	p    float64
	n    int
}

var specLetter = map[int]string{
	schedule.KindBucket: "b", schedule.KindFixed: "f", schedule.KindSliding: "s",
	schedule.KindLog: "l", schedule.KindFirst: "u",
}

func (c dcfg) spec() string {
	parts := make([]string, len(c.lims))
	for i, l := range c.lims {
		parts[i] = specLetter[l.kind] + ":" + fnum(l.p) + "/" + strconv.Itoa(l.n)
	}
	return "0|" + strings.Join(parts, ",")
}

func (c dcfg) conf() schedule.Config {
	return schedule.Config{Interval: c.iv, Burst: float64(c.burst), Sec: 1e6}
}

// limits returns the further limits as the engine keeps them, nil if none.
func (c dcfg) limits() []schedule.Limit {
	if len(c.lims) == 0 {
		return nil
	}
	out := make([]schedule.Limit, len(c.lims))
	for i, l := range c.lims {
		if l.kind == schedule.KindBucket {
			out[i] = schedule.BucketLimit(l.p, float64(l.n))
		} else {
			out[i] = schedule.WindowLimit(l.kind, l.p, float64(l.n), 0)
		}
	}
	return out
}

func (c dcfg) String() string {
	s := fmt.Sprintf("interval %v µs, burst %d, version %d", c.iv, c.burst, c.ver)
	if len(c.lims) > 0 {
		s += ", limits " + c.spec()
	}
	return s
}

func fnum(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// genConfig draws a configuration: no limit, whole or fractional µs
// intervals, bursts from 1, and (half the time, if limits) one to three
// further limits of every kind.
func genConfig(r *rand.Rand, limits, exact bool) dcfg {
	var c dcfg
	switch r.IntN(6) {
	case 0:
		c.iv = 0
	case 1:
		c.iv = float64(1 + r.IntN(50)*1000) // whole ms
	case 2:
		c.iv = 1e6 / float64(1+r.IntN(1000)) // a rate a second: fractional µs
	case 3:
		c.iv = float64(1 + r.IntN(2000)) // fast
	case 4:
		c.iv = 1e6 / float64(1+r.IntN(5)) // slow
	default:
		c.iv = math.Round(r.Float64()*1e5*100) / 100
	}
	if exact {
		c.iv = math.Round(c.iv)
	}
	c.burst = 1 + r.IntN(10)
	if r.IntN(4) == 0 {
		c.burst = 1
	}
	if !limits {
		return c
	}
	for range 1 + r.IntN(3) {
		l := dlim{kind: r.IntN(5), n: 1 + r.IntN(20)}
		if l.kind == schedule.KindBucket {
			l.p = []float64{1000, 1e6 / 7, 250000, 33}[r.IntN(4)]
		} else {
			l.p = []float64{100000, 1e6, 2e6, 60e6, 333333}[r.IntN(5)]
		}
		c.lims = append(c.lims, l)
	}
	return c
}

// dop is one op of a sequence at its time now (µs of the pinned clock);
// c, if set, is a new configuration the op is called with (a higher
// Version: the script replaces the state's, which keeps its units at the
// new pace).
type dop struct {
	now float64
	op  schedule.Op
	c   *dcfg
}

func (o dop) String() string {
	s := fmt.Sprintf("at %.0f: %T%+v", o.now, o.op, o.op)
	if o.c != nil {
		s += fmt.Sprintf(" under %v", *o.c)
	}
	return s
}

// gen draws a sequence's ops one at a time, from what the engine's state
// and replies tell (the tickets given, the leased ones).
type gen struct {
	r       *rand.Rand
	c       dcfg
	now     float64
	tickets []ticketN // tickets given, gone or not
	leased  []int64   // leased tickets not given back
	named   bool      // an op named the further limits
	// budget: a hidden budget's server (see schedule_budget.go): cycles
	// of budget units at the pace, each ended by a refusal with a
	// Retry-After, and acceptances of units past a learned window's
	// reset; 0 for none.
	budget, sent int
}

type ticketN struct {
	schedule.Ticket
	n int64
}

// step advances the clock: not at all, by µs, by about an interval, by
// ms, by seconds, or past windows and keeps.
func (g *gen) step() {
	r := g.r
	var d float64
	switch k := r.IntN(20); {
	case k < 4:
		d = 0
	case k < 7:
		d = float64(1 + r.IntN(5))
	case k < 12:
		iv := g.c.iv
		if iv == 0 {
			iv = 10000
		}
		d = math.Floor(iv * (0.5 + r.Float64()))
		if r.IntN(3) == 0 {
			d = math.Ceil(iv) // the next unit's turn, about
		}
	case k < 15:
		d = float64(1+r.IntN(300)) * 1000
	case k < 18:
		d = float64(1+r.IntN(3000)) * 1000
	case k < 19:
		d = 11e6 + float64(r.IntN(1000))
	default:
		d = 61e6 + float64(r.IntN(1e6))
	}
	g.now += d
}

// maxWait draws a wait's bound: none, or up to 2 s.
func (g *gen) maxWait() float64 {
	if g.r.IntN(2) == 0 {
		return math.Inf(1)
	}
	return float64(1 + g.r.IntN(2e6))
}

// maxQueued draws a wait's bound on the units queued: none half the
// time, else one a few waits deep (so that waits are refused for it).
func (g *gen) maxQueued() int64 {
	if g.r.IntN(2) == 0 {
		return 0
	}
	return int64(1 + g.r.IntN(8))
}

// queue draws a wait's queue: retries one time in five, else a class,
// the default (First) most often, critical and background as often as
// each other (classes.go).
func (g *gen) queue() int {
	switch k := g.r.IntN(10); {
	case k < 2:
		return schedule.Retry
	case k < 6:
		return schedule.First
	case k < 8:
		return schedule.Critical
	}
	return schedule.Background
}

// cost draws a wait's units: within the burst when there is a pace.
func (g *gen) cost() int64 {
	hi := g.c.burst
	if g.c.iv == 0 {
		hi = 3
	}
	if g.r.IntN(2) == 0 {
		return 1
	}
	return int64(1 + g.r.IntN(hi))
}

// xcost draws a wait's cost in each further limit, within what it lets
// go at once; nil without further limits.
func (g *gen) xcost() []float64 {
	if len(g.c.lims) == 0 {
		return nil
	}
	out := make([]float64, len(g.c.lims))
	for i, l := range g.c.lims {
		if g.r.IntN(4) > 0 {
			out[i] = float64(g.r.IntN(l.n + 1))
		}
	}
	return out
}

func (g *gen) seed() *schedule.Known {
	if g.r.IntN(25) != 0 {
		return nil
	}
	k := &schedule.Known{}
	if g.r.IntN(2) == 0 {
		k.Floor = float64(g.r.IntN(2e6))
	}
	if g.r.IntN(2) == 0 {
		k.Hold = float64(g.r.IntN(2e6))
	}
	return k
}

// ticket picks a ticket given earlier (gone or not); ok is false if
// none was given (the op then names a lost state).
func (g *gen) ticket() (t ticketN, ok bool) {
	if len(g.tickets) == 0 {
		return ticketN{schedule.Ticket{Queue: schedule.First, End: 1}, 1}, false
	}
	// The newest most often: the live ones.
	i := len(g.tickets) - 1 - int(math.Floor(math.Abs(g.r.NormFloat64())*3))
	return g.tickets[max(i, 0)], true
}

// budgetOp draws the next op of a hidden budget's cycles, or nil for a
// random one.
func (g *gen) budgetOp() schedule.Op {
	r := g.r
	switch k := r.IntN(20); {
	case k == 0:
		return nil
	case k < 3:
		// A unit sent past a learned window's reset, accepted.
		return schedule.Adapt{Cost: 1, Age: float64(r.IntN(20000)), Accepted: schedule.AcceptedUnit}
	case g.sent >= g.budget:
		g.sent = 0
		return schedule.Adapt{Cost: 1, Pause: 1e6, Refused: true, Age: float64(r.IntN(20000))}
	}
	g.sent++
	return schedule.Wait{N: 1, Queue: schedule.First, MaxWait: math.Inf(1)}
}

// next draws the next op.
func (g *gen) next() dop {
	if g.budget > 0 {
		op := g.budgetOp()
		if op != nil {
			switch op.(type) {
			case schedule.Wait:
				g.now += math.Ceil(max(g.c.iv, 1000) * (0.9 + 0.2*g.r.Float64()))
			default:
				g.now += float64(g.r.IntN(5000))
			}
			if _, ok := op.(schedule.Adapt); ok && g.sent == 0 {
				g.now += 1e6 // the Retry-After
			}
			return dop{now: g.now, op: op}
		}
	}
	g.step()
	r := g.r
	var nc *dcfg
	if r.IntN(100) == 0 {
		// The fleet deploys a new limit with a higher Version.
		c := genConfig(r, false, g.c.iv == math.Round(g.c.iv))
		c.lims, c.ver = g.c.lims, g.c.ver+1
		g.c, nc = c, &c
	}
	x := len(g.c.lims) > 0
	var op schedule.Op
	k := r.IntN(100)
	if x && !g.named {
		// A Limiter with further limits names them in its first call (every
		// request waits first): the script knows them from then on.
		k, g.named = 0, true
	}
	switch {
	case k < 30:
		op = schedule.Wait{N: g.cost(), Queue: g.queue(), MaxWait: g.maxWait(), MaxQueued: g.maxQueued(), Cost: g.xcost(), Seed: g.seed()}
	case k < 38:
		op = schedule.Try{N: g.cost(), Queue: g.queue(), Cost: g.xcost(), Seed: g.seed()}
	case k < 48:
		t, ok := g.ticket()
		op = schedule.Cancel{Ticket: t.Ticket, N: t.n, Lost: !ok || r.IntN(10) == 0}
	case k < 53:
		var ts []schedule.Ticket
		lost := r.IntN(10) == 0
		for range 1 + r.IntN(3) {
			t, ok := g.ticket()
			ts, lost = append(ts, t.Ticket), lost || !ok
		}
		op = schedule.Turns{Tickets: ts, Lost: lost}
	case k < 57:
		op = schedule.Pause{D: float64(1 + r.IntN(2e6))}
	case k < 75:
		op = g.adapt()
	case k < 85:
		spent := float64(g.cost())
		actual := float64(r.IntN(2*int(spent) + 2))
		var diff []float64
		if x {
			diff = make([]float64, len(g.c.lims))
			for i, l := range g.c.lims {
				diff[i] = float64(r.IntN(2*l.n+2) - r.IntN(l.n+1)) // charges past the bound too
			}
		}
		op = schedule.Settle{Spent: spent, Actual: actual, Diff: diff}
	case k < 93 && !x:
		op = g.lease()
	default:
		op = schedule.StateView{Limits: x && r.IntN(2) == 0}
	}
	return dop{now: g.now, op: op, c: nc}
}

// adapt draws a response's feedback of every shape the Limiter sends.
func (g *gen) adapt() schedule.Adapt {
	r := g.r
	a := schedule.Adapt{Cost: float64(g.cost())}
	if r.IntN(2) == 0 {
		a.Age = float64(r.IntN(300000))
	}
	switch r.IntN(7) {
	case 0: // an acceptance that says nothing but the units answered
	case 1, 2: // a window
		a.Window = true
		size := 0.0
		if r.IntN(3) > 0 {
			size = float64(5 + r.IntN(100))
		}
		a.Size = size
		a.Left = float64(r.IntN(int(max(size, 20)) + 1))
		if r.IntN(5) == 0 {
			a.Left += 0.5
		}
		a.Reset = float64(r.IntN(10e6))
		if r.IntN(2) == 0 {
			a.Length = float64(1+r.IntN(60)) * 1e6
		}
		if r.IntN(4) == 0 {
			a.Pause = float64(1 + r.IntN(3e6))
			a.Refused = true
			a.Accepted = schedule.AcceptedStated
		}
	case 3: // a refusal with Retry-After
		a.Pause = float64(1+r.IntN(3)) * 1e6
		if r.IntN(3) == 0 {
			a.Pause = float64(1 + r.IntN(3e6))
		}
		a.Refused = true
	case 4: // a bare rejection
		a.Rejected = true
		a.RejectAge = float64(r.IntN(200000))
	case 5: // an acceptance of a unit past a learned window's reset
		a.Accepted = schedule.AcceptedUnit
	default: // a pause only
		a.Pause = float64(1 + r.IntN(2e6))
	}
	return a
}

// lease draws a lease call: turns for waits queued and expected, and
// tickets given back.
func (g *gen) lease() schedule.Lease {
	r := g.r
	l := schedule.Lease{K: r.IntN(9), MaxWait: g.maxWait(), Seed: g.seed()}
	l.Need = r.IntN(l.K+1) - r.IntN(2)
	if r.IntN(2) == 0 {
		l.Rate = float64(50 + r.IntN(1000))
		l.Late = float64(r.IntN(50000))
	}
	if len(g.leased) > 0 && r.IntN(2) == 0 {
		n := 1 + r.IntN(len(g.leased))
		l.Back = append([]int64(nil), g.leased[len(g.leased)-n:]...)
		g.leased = g.leased[:len(g.leased)-n]
		l.BackLost = r.IntN(10) == 0
	}
	return l
}

// forget drops the ticket (qi, e) from those to name: it was given back.
func (g *gen) forget(qi int, e int64) {
	g.tickets = slices.DeleteFunc(g.tickets, func(t ticketN) bool { return t.Queue == qi && t.End == e })
	if qi == schedule.First {
		g.leased = slices.DeleteFunc(g.leased, func(l int64) bool { return l == e })
	}
}

// saw records what an op's reply gave: tickets to cancel, ask or give back.
func (g *gen) saw(o dop, rep schedule.Reply) {
	switch op := o.op.(type) {
	case schedule.Wait:
		if rep.OK {
			g.tickets = append(g.tickets, ticketN{schedule.Ticket{Queue: op.Queue, End: rep.End}, op.N})
		}
	case schedule.Cancel:
		// A ticket is given back once: its numbers may be given out again.
		g.forget(op.Queue, op.End)
	case schedule.Lease:
		for _, e := range op.Back {
			g.forget(schedule.First, e)
		}
		if rep.OK {
			for e := rep.End - int64(len(rep.Turns)) + 1; e <= rep.End; e++ {
				g.leased = append(g.leased, e)
				g.tickets = append(g.tickets, ticketN{schedule.Ticket{Queue: schedule.First, End: e}, 1})
			}
		}
	}
	if len(g.tickets) > 40 {
		g.tickets = g.tickets[len(g.tickets)-40:]
	}
	if len(g.leased) > 40 {
		g.leased = g.leased[len(g.leased)-40:]
	}
}
