package schedtest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/throttle-go/throttle"
)

// ExtraLimit is a further limit of the quota: a token bucket in a unit of
// its own ([throttle.Limiter.Limits]).
type ExtraLimit struct {
	Unit  string
	Limit float64 // units per second; > 0
	Burst int     // units at once; 0 means 1
}

func (l ExtraLimit) burst() int { return max(l.Burst, 1) }

// Limits returns c's further limits as a Limiter's Limits.
func (c Config) Limits() []throttle.UnitRate {
	var u []throttle.UnitRate
	for _, l := range c.Extra {
		u = append(u, throttle.UnitRate{Unit: l.Unit, Rate: throttle.Rate{Limit: rate.Limit(l.Limit), Burst: l.Burst}})
	}
	return u
}

// cost returns o's cost as a throttle.Cost.
func (c Config) cost(o Op) throttle.Cost {
	tc := throttle.Cost{N: o.N}
	for i, n := range o.Units {
		if n > 0 {
			tc.Units = append(tc.Units, throttle.UnitCost{Unit: c.Extra[i].Unit, N: n})
		}
	}
	return tc
}

func (c Config) extraString() string {
	if len(c.Extra) == 0 {
		return ""
	}
	var b strings.Builder
	for _, l := range c.Extra {
		fmt.Fprintf(&b, ", %s %v/s burst %d", l.Unit, l.Limit, l.burst())
	}
	return b.String()
}

// extraCosts draws a wait's costs in the further limits: a quarter of
// them nothing, the others 1 to the limit's burst.
func extraCosts(r *rand.Rand, extra []ExtraLimit) []int {
	u := make([]int, len(extra))
	for i, l := range extra {
		if r.IntN(4) != 0 {
			u[i] = 1 + r.IntN(l.burst())
		}
	}
	return u
}

// units returns wait i's cost in the further limit L.
func (c *checker) units(i, L int) float64 {
	if u := c.seq.Ops[i].Units; L < len(u) {
		return float64(u[L])
	}
	return 0
}

// neverOverExtra: on each further limit, the admissions replayed through
// its bucket with their costs in its unit conform.
func (c *checker) neverOverExtra() {
	adm := c.admitted()
	for L, l := range c.seq.Config.Extra {
		interval, burst := 1e9/l.Limit, float64(l.burst())
		tau, tat := burst*interval, math.Inf(-1)
		for _, i := range adm {
			n := c.units(i, L)
			if n == 0 {
				continue
			}
			t := c.ret(i)
			if early := tat + n*interval - tau; t+c.tol < early {
				c.errorf("never over (%s %v/s burst %v): wait %d admitted %v %s at %v; the bucket allows them from %v",
					l.Unit, l.Limit, burst, i, n, l.Unit, time.Duration(t), time.Duration(early))
				break
			}
			tat = max(tat, t) + n*interval
		}
	}
}

// extraWork returns how long the further limits take for the costs of
// the waits queued: their units in each limit at its pace, summed (a turn
// is the latest among the limits, at most their sum).
func (c *checker) extraWork(queued []int) float64 {
	d := 0.0
	for L, l := range c.seq.Config.Extra {
		for _, i := range queued {
			d += c.units(i, L) * 1e9 / l.Limit
		}
	}
	return d
}

// xbucket is one limit of the ideal schedule of conserveExtra.
type xbucket struct {
	interval, tau, tat float64
	cost               func(i int) float64
}

// conserveExtra is conserve for a quota with further limits (sequences of
// first attempts without feedback or settles): every wait goes by its
// turn in the ideal FIFO schedule of all the limits, where a wait's turn
// is the latest among them, FIFO, a wait that went spends its cost on
// every limit at its turn (GCRA: no credit from before it went) and one
// that failed spends nothing and leaves the queue when it failed (all or
// none, exact refund on every limit). No wait fails after that turn, and
// no wait is refused whose turn at its call was within its deadline (a
// refusal is checked when every wait called before it had gone or left
// by its call, or went: the turn is then exact).
func (c *checker) conserveExtra() {
	cfg := c.seq.Config
	var bs []xbucket
	if cfg.Limit > 0 {
		iv := 1e9 / cfg.Limit
		bs = append(bs, xbucket{iv, float64(cfg.burst()) * iv, math.Inf(-1), func(i int) float64 { return float64(c.seq.Ops[i].N) }})
	}
	for L, l := range cfg.Extra {
		iv := 1e9 / l.Limit
		bs = append(bs, xbucket{iv, float64(l.burst()) * iv, math.Inf(-1), func(i int) float64 { return c.units(i, L) }})
	}
	turn := func(i int, from float64) float64 {
		for _, b := range bs {
			if n := b.cost(i); n > 0 {
				from = max(from, b.tat+n*b.interval-b.tau)
			}
		}
		return from
	}
	last := math.Inf(-1)
	var failedLeave []float64 // when the waits that failed left the queue
	for _, i := range c.waits {
		call := c.call(i)
		if c.refused(i) {
			pending := false
			for _, lv := range failedLeave {
				pending = pending || lv+c.tol >= call
			}
			if t := turn(i, max(call, last)); !pending && t <= ns(c.lg.Results[i].Deadline)-c.tol {
				c.errorf("refund: wait %d refused at %v though its turn in the ideal FIFO schedule of every limit was %v, within its deadline %v",
					i, c.lg.Results[i].Return, time.Duration(t), c.lg.Results[i].Deadline)
			}
			continue
		}
		t := turn(i, max(call, last))
		if c.ok(i) {
			if ret := c.ret(i); ret > t+c.tol {
				c.errorf("refund: wait %d admitted at %v, later than its turn %v in the ideal FIFO schedule of every limit",
					i, time.Duration(ret), time.Duration(t))
			}
			for k := range bs {
				if n := bs[k].cost(i); n > 0 {
					bs[k].tat = max(bs[k].tat, t) + n*bs[k].interval
				}
			}
			last = max(last, t)
			continue
		}
		f := c.ret(i)
		if t+c.tol < f {
			c.errorf("refund: wait %d failed at %v, though its turn in the ideal FIFO schedule of every limit came at %v",
				i, time.Duration(f), time.Duration(t))
		}
		last = max(last, min(f, t))
		failedLeave = append(failedLeave, min(f, t))
	}
}
