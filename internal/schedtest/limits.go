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

// ExtraLimit is a further limit of the quota, in a unit of its own
// (an entry of [throttle.Limiter.Limits] after the first): a token
// bucket, or a window.
type ExtraLimit struct {
	Unit  string
	Limit float64 // a bucket's units per second; > 0 without a Window
	Burst int     // a bucket's units at once (0 means 1), a window's Count
	// Window: a window of Burst units per Window (fixed, aligned to the
	// Unix epoch, or the sliding window counter if Sliding) instead of
	// a bucket.
	Window  time.Duration
	Sliding bool
	// Log: the window is an exact sliding log (at most Burst units in any
	// interval of length Window).
	Log bool
	// FirstUse: fixed windows aligned to first use (each starts at the
	// first units that go once the one before ended).
	FirstUse bool
}

func (l ExtraLimit) burst() int { return max(l.Burst, 1) }

// Limits returns c's limits as a Limiter's Limits: the first limit
// (Limit, Burst; none if both are 0), then the further limits (Extra).
func (c Config) Limits() []throttle.Limit {
	var u []throttle.Limit
	if c.Limit != 0 || c.Burst != 0 {
		u = append(u, throttle.Limit{Rate: rate.Limit(c.Limit), Burst: c.Burst})
	}
	for _, l := range c.Extra {
		if l.Window > 0 {
			kind := throttle.Fixed
			switch {
			case l.Log:
				kind = throttle.SlidingLog
			case l.FirstUse:
				kind = throttle.FromFirstUse
			case l.Sliding:
				kind = throttle.Sliding
			}
			u = append(u, throttle.Limit{Unit: l.Unit, Count: l.burst(), Per: l.Window, Kind: kind})
			continue
		}
		u = append(u, throttle.Limit{Unit: l.Unit, Rate: rate.Limit(l.Limit), Burst: l.Burst})
	}
	return u
}

// cost returns o's cost as a throttle.Cost.
func (c Config) cost(o Op) throttle.Cost {
	tc := throttle.Cost{N: o.N, Retry: o.Retry}
	for i, n := range o.Units {
		if n > 0 {
			if tc.Units == nil {
				tc.Units = make(map[string]int)
			}
			tc.Units[c.Extra[i].Unit] += n
		}
	}
	return tc
}

// actual returns o's settled cost (Op.ActualUnits) as a throttle.Cost:
// every unit o's cost names, as settled.
func (c Config) actual(o Op) throttle.Cost {
	tc := throttle.Cost{N: o.Actual}
	for i, n := range o.Units {
		if n > 0 {
			if tc.Units == nil {
				tc.Units = make(map[string]int)
			}
			tc.Units[c.Extra[i].Unit] += o.ActualUnits[i]
		}
	}
	return tc
}

// settlesUnits reports whether some wait is settled in the further
// limits.
func (s Sequence) settlesUnits() bool {
	for _, o := range s.Ops {
		if o.SettleAfter > 0 && o.ActualUnits != nil {
			return true
		}
	}
	return false
}

func (c Config) extraString() string {
	if len(c.Extra) == 0 {
		return ""
	}
	var b strings.Builder
	for _, l := range c.Extra {
		switch {
		case l.Window > 0 && l.FirstUse:
			fmt.Fprintf(&b, ", %s %d per %v from first use", l.Unit, l.burst(), l.Window)
		case l.Window > 0 && l.Log:
			fmt.Fprintf(&b, ", %s %d per %v log", l.Unit, l.burst(), l.Window)
		case l.Window > 0 && l.Sliding:
			fmt.Fprintf(&b, ", %s %d per %v sliding", l.Unit, l.burst(), l.Window)
		case l.Window > 0:
			fmt.Fprintf(&b, ", %s %d per %v fixed", l.Unit, l.burst(), l.Window)
		default:
			fmt.Fprintf(&b, ", %s %v/s burst %d", l.Unit, l.Limit, l.burst())
		}
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
		if l.Window > 0 && l.Log {
			c.neverOverLog(adm, L, l)
			continue
		}
		if l.Window > 0 && l.FirstUse {
			c.neverOverFirst(adm, L, l)
			continue
		}
		if l.Window > 0 {
			c.neverOverWindow(adm, L, l)
			continue
		}
		interval, burst := 1e9/l.Limit, float64(l.burst())
		if am := c.amendsUnits(L); len(am) > 0 {
			// Settled costs: the ledger of schedule.go's settle rule,
			// which each further bucket follows.
			c.ledger(adm, am, interval, burst, fmt.Sprintf("%s %v/s burst %v", l.Unit, l.Limit, burst), func(i int) float64 { return c.units(i, L) })
			continue
		}
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
		per := 1e9 / l.Limit
		if l.Window > 0 {
			d += ns(l.Window) // the window the first waits in
			per = ns(l.Window) / float64(l.burst())
		}
		for _, i := range queued {
			d += c.units(i, L) * per
		}
	}
	return d
}

// extraDebt is extraWork for the charges settled in the further limits
// before t (Op.ActualUnits above a wait's cost): units the waits after
// them pay, at each limit's pace.
func (c *checker) extraDebt(t float64) float64 {
	d := 0.0
	for L, l := range c.seq.Config.Extra {
		per := 1e9 / l.Limit
		if l.Window > 0 {
			per = ns(l.Window) / float64(l.burst())
		}
		for j, o := range c.seq.Ops {
			r := c.lg.Results[j]
			if o.Kind != Wait || !r.Settled || r.SettleErr != nil || L >= len(o.ActualUnits) || ns(r.SettleAt) >= t {
				continue
			}
			if ch := float64(o.ActualUnits[L]) - c.units(j, L); ch > 0 {
				d += ch * per
			}
		}
	}
	return d
}

// xbucket is one limit of the ideal schedule of conserveExtra: a bucket
// (interval, tau, tat), or a window (w, q, off; the window units last
// went in, and its counts).
type xbucket struct {
	interval, tau, tat  float64
	cost                func(i int) float64
	w, q, off           float64
	sliding, log, first bool
	start               float64 // a window aligned to first use: its start
	idx, cur, prev      float64
	times, units        []float64 // a log's: the times units went, and how many
}

// earliest returns the earliest time from t at which the limit lets n
// units go (see throttle's schedule_xlimit.go; written again here).
func (b *xbucket) earliest(t, n float64) float64 {
	if b.w == 0 {
		return max(t, b.tat+n*b.interval-b.tau)
	}
	if b.first {
		// In the window that started at start, or from its end.
		if t < b.start+b.w && b.cur+n > b.q {
			return b.start + b.w
		}
		return t
	}
	if b.log {
		// The least t' ≥ t at which the units in (t' − w, t'] and n are
		// at most q, no earlier than the last units (FIFO): found by
		// trying t and the time each logged unit leaves, in order.
		if k := len(b.times); k > 0 {
			t = max(t, b.times[k-1])
		}
		fits := func(at float64) bool {
			in := n
			for j, s := range b.times {
				if s+b.w > at {
					in += b.units[j]
				}
			}
			return in <= b.q
		}
		if fits(t) {
			return t
		}
		for _, s := range b.times { // ascending
			if at := s + b.w; at > t && fits(at) {
				return at
			}
		}
		panic("unreachable: once every unit left, n ≤ q fits")
	}
	win := math.Floor((t + b.off) / b.w)
	if win < b.idx {
		win, t = b.idx, max(t, b.idx*b.w-b.off)
	}
	prev, cur := 0.0, 0.0
	switch win {
	case b.idx:
		prev, cur = b.prev, b.cur
	case b.idx + 1:
		prev = b.cur
	}
	if cur+n > b.q {
		win, t, prev, cur = win+1, (win+1)*b.w-b.off, cur, 0
	}
	if b.sliding && prev > 0 {
		if f := (t+b.off)/b.w - win; prev*(1-f)+cur+n > b.q+1e-9 {
			t = max(t, (win+1-(b.q-cur-n)/prev)*b.w-b.off)
		}
	}
	return t
}

// take records n units gone at t.
func (b *xbucket) take(t, n float64) {
	if b.w == 0 {
		b.tat = max(b.tat, t) + n*b.interval
		return
	}
	if b.log {
		b.times, b.units = append(b.times, t), append(b.units, n)
		return
	}
	if b.first {
		if t >= b.start+b.w {
			b.start, b.cur = t, 0
		}
		b.cur += n
		return
	}
	if win := math.Floor((t + b.off) / b.w); win > b.idx {
		if win == b.idx+1 {
			b.prev = b.cur
		} else {
			b.prev = 0
		}
		b.idx, b.cur = win, 0
	}
	b.cur += n
}

// neverOverWindow: the admissions of L's units, in time order, never
// take a window past its count (fixed: the units of each window aligned
// to the Unix epoch; sliding: prev·(1 − f) + cur at each admission).
func (c *checker) neverOverWindow(adm []int, L int, l ExtraLimit) {
	w := ns(l.Window)
	b := xbucket{w: w, q: float64(l.burst()), sliding: l.Sliding, idx: math.Inf(-1),
		off: float64(c.lg.Start.UnixNano() % int64(l.Window))}
	// Settled costs: the units given back count off the window they are
	// settled in (those that go less those given back never pass the
	// count; charges only hold waits back, so they are not counted).
	var gb []amend
	for _, a := range c.amendsUnits(L) {
		if a.d < 0 {
			gb = append(gb, a)
		}
	}
	for _, i := range adm {
		n := c.units(i, L)
		if n == 0 {
			continue
		}
		for len(gb) > 0 && gb[0].t <= c.ret(i)+c.tol {
			// A give-back up to tol after the admission may have come
			// first: counted before it (the more lenient order).
			b.take(gb[0].t, gb[0].d)
			gb = gb[1:]
		}
		// An admission up to tol early counts as on time: it is checked
		// at t + tol (a later time lets no fewer units go), and counted at
		// t − tol (within tol of a window's end, in that window: the
		// units of the next are not the fewer for it).
		t := c.ret(i) + c.tol
		if e := b.earliest(t, n); e > t {
			c.errorf("never over (%s %d per %v, sliding %v): wait %d admitted %v %s at %v; the window allows them from %v",
				l.Unit, l.burst(), l.Window, l.Sliding, i, n, l.Unit, time.Duration(c.ret(i)), time.Duration(e))
			return
		}
		b.take(c.ret(i)-c.tol, n)
	}
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
		bs = append(bs, xbucket{interval: iv, tau: float64(cfg.burst()) * iv, tat: math.Inf(-1), cost: func(i int) float64 { return float64(c.seq.Ops[i].N) }})
	}
	for L, l := range cfg.Extra {
		cost := func(i int) float64 { return c.units(i, L) }
		if l.Window > 0 {
			bs = append(bs, xbucket{cost: cost, w: ns(l.Window), q: float64(l.burst()), sliding: l.Sliding, log: l.Log, first: l.FirstUse, start: math.Inf(-1),
				idx: math.Inf(-1), off: float64(c.lg.Start.UnixNano() % int64(l.Window))})
			continue
		}
		iv := 1e9 / l.Limit
		bs = append(bs, xbucket{interval: iv, tau: float64(l.burst()) * iv, tat: math.Inf(-1), cost: cost})
	}
	turn := func(i int, from float64) float64 {
		for range 2*len(bs) + 2 { // the least fixed point
			moved := false
			for k := range bs {
				if n := bs[k].cost(i); n > 0 {
					if e := bs[k].earliest(from, n); e > from {
						from, moved = e, true
					}
				}
			}
			if !moved {
				break
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
					bs[k].take(t, n)
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
		if f+c.tol >= t {
			// Within tol of its turn: its units may have gone (see
			// conserve); the ideal schedule spends them.
			for k := range bs {
				if n := bs[k].cost(i); n > 0 {
					bs[k].take(t, n)
				}
			}
			last = max(last, t)
			continue
		}
		last = max(last, min(f, t))
		failedLeave = append(failedLeave, min(f, t))
	}
}

// neverOverLog: a sliding log's admissions of L's units never put more
// than its count in any interval of length w, checked exactly over the
// admitted times: the busiest interval ends at an admission, so each
// admission's interval (t − w, t] is counted. Times within tol count
// leniently (an earlier unit counts if it is inside by more than 2·tol),
// and units given back by settles count off at their settle, if it is in
// the interval (up to tol after the admission: it may have come first),
// as neverOverWindow counts them; charges only hold waits back.
func (c *checker) neverOverLog(adm []int, L int, l ExtraLimit) {
	w, q := ns(l.Window), float64(l.burst())
	var gb []amend
	for _, a := range c.amendsUnits(L) {
		if a.d < 0 {
			gb = append(gb, a)
		}
	}
	for k, i := range adm {
		n := c.units(i, L)
		if n == 0 {
			continue
		}
		t := c.ret(i)
		in := n
		for _, j := range adm[:k] {
			if c.ret(j)+w > t+2*c.tol {
				in += c.units(j, L)
			}
		}
		for _, a := range gb {
			if a.t+w > t-c.tol && a.t <= t+c.tol {
				in += a.d
			}
		}
		if in > q {
			c.errorf("never over (%s %d per %v, log): wait %d admitted %v %s at %v, %v in the %v up to it",
				l.Unit, l.burst(), l.Window, i, n, l.Unit, time.Duration(t), in, l.Window)
			return
		}
	}
}

// neverOverFirst: windows aligned to first use never count more than
// theirs. Replayed from the admissions and the settles of L's units: a
// window starts at the first admission or charge once the one before
// ended (a charge is a use), and counts the admissions in it less the
// units given back in it (charges only hold waits back, so they are not
// counted; never below zero, as the window). Times are seen within tol,
// so the replay keeps every window the times allow (one a start, its
// least count), and an admission fails only if it is over in every one:
// a use within 2·tol of the window's end may start the next or not, and
// the give-backs within tol of an admission may come before it or after
// it, in their order: any first ones before, the rest after (a settle
// lets the units whose turns have come go first). Taking them all
// before or all after, as it did, clamped a give-back of the admitted
// wait's own settle at an empty window before its units came: a
// seed of TestPropRedisLimits/limits-settles-first (346663817) counted
// 7 of 5 where the order of the times (−5, +3, −2, +4) counts 5.
func (c *checker) neverOverFirst(adm []int, L int, l ExtraLimit) {
	w, q, tol := ns(l.Window), float64(l.burst()), c.tol
	type win struct{ start, cur float64 }
	add := func(ws []win, v win) []win {
		for k := range ws {
			if ws[k].start == v.start {
				ws[k].cur = min(ws[k].cur, v.cur)
				return ws
			}
		}
		return append(ws, v)
	}
	use := func(states []win, t float64) []win {
		var next []win
		for _, v := range states {
			if t+2*tol < v.start+w { // surely in v's window
				next = add(next, v)
				continue
			}
			next = add(next, win{t, 0})
			if t < v.start+w+2*tol { // it may be in v's window
				next = add(next, v)
			}
		}
		return next
	}
	giveBack := func(states []win, a amend) []win {
		next := make([]win, 0, len(states))
		for _, v := range states {
			if a.t < v.start+w+tol {
				v.cur = max(v.cur+a.d, 0)
			}
			next = add(next, v)
		}
		return next
	}
	amends := func(states []win, am []amend) []win {
		for _, a := range am {
			if a.d > 0 {
				states = use(states, a.t)
			} else {
				states = giveBack(states, a)
			}
		}
		return states
	}
	admit := func(states []win, t, n float64) []win {
		var ok []win
		for _, v := range use(states, t) {
			if v.cur+n <= q {
				ok = append(ok, win{v.start, v.cur + n})
			}
		}
		return ok
	}
	states := []win{{math.Inf(-1), 0}}
	am := c.amendsUnits(L)
	for _, i := range adm {
		n := c.units(i, L)
		if n == 0 {
			continue
		}
		t := c.ret(i)
		k := 0
		for k < len(am) && am[k].t < t-tol {
			k++
		}
		states, am = amends(states, am[:k]), am[k:]
		k = 0
		for k < len(am) && am[k].t <= t+tol {
			k++
		}
		near := am[:k] // before or after the admission, in their order
		am = am[k:]
		var next []win
		for j := range len(near) + 1 {
			for _, v := range amends(admit(amends(states, near[:j]), t, n), near[j:]) {
				next = add(next, v)
			}
		}
		if len(next) == 0 {
			v := use(states, t)[0]
			c.errorf("never over (%s %d per %v from first use): wait %d admitted %v %s at %v, %v in the window from %v",
				l.Unit, l.burst(), l.Window, i, n, l.Unit, time.Duration(t), v.cur+n, time.Duration(v.start))
			return
		}
		states = next
	}
}
