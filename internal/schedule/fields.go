package schedule

import (
	"math"
	"strconv"
)

// A key's state as named numbers, and where the distributed package's
// script keeps each one: the one layout both sides read (the script's
// hash: the core c, struct-packed doubles after a tag byte, and x, a
// MessagePack array; see schedule.lua and schedule_state.lua).

// Field is one number of a key's state: booleans are 0 or 1, and a time
// not set is −Inf (the script's NONE, −1e300).
type Field struct {
	Name  string
	Value float64
}

// Slot places a field in the script's hash: Core is its position among
// the core's numbers (1-based after the tag: 1 is the state's id), X its
// slot in x's array and Sub its position in that slot's array (0: the
// slot is the number); zero where it is not kept there.
type Slot struct {
	Name         string
	Core, X, Sub int
	get          func(*State) float64
}

func bit(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// layout is the state's fields of fixed place, in the script's order.
// Not in it: the state's id and the TTL's end (the core's 1 and 14: the
// store's), the configuration (core 16–18), the declared pace and the
// queued-turns-sped flag (the script has neither), and the lists: the
// queues' holes and tickets of several units (x 1–4 and 32–35, pairs of
// end and units) and the further limits (x 27; see Fields).
var layout = []Slot{
	{"tat", 2, 0, 0, func(s *State) float64 { return s.tat }},
	{"hold", 3, 0, 0, func(s *State) float64 { return s.hold }},
	{"q0.rel", 4, 0, 0, func(s *State) float64 { return float64(s.q[0].rel) }},
	{"q0.end", 5, 0, 0, func(s *State) float64 { return float64(s.q[0].end) }},
	{"q1.rel", 6, 0, 0, func(s *State) float64 { return float64(s.q[1].rel) }},
	{"q1.end", 7, 0, 0, func(s *State) float64 { return float64(s.q[1].end) }},
	{"pending", 8, 0, 0, func(s *State) float64 { return s.pending }},
	{"lastGo", 9, 0, 0, func(s *State) float64 { return s.lastGo }},
	{"sentSec", 10, 0, 0, func(s *State) float64 { return s.sentSec }},
	{"sentCur", 11, 0, 0, func(s *State) float64 { return s.sentCur }},
	{"sentPrev", 12, 0, 0, func(s *State) float64 { return s.sentPrev }},
	{"maxCost", 13, 0, 0, func(s *State) float64 { return s.maxCost }},
	{"busySince", 15, 0, 0, func(s *State) float64 { return s.busySince }},
	{"win.valid", 0, 5, 0, func(s *State) float64 { return bit(s.win.valid) }},
	{"win.left", 0, 6, 0, func(s *State) float64 { return s.win.left }},
	{"win.reset", 0, 7, 0, func(s *State) float64 { return s.win.reset }},
	{"win.size", 0, 8, 0, func(s *State) float64 { return s.win.size }},
	{"win.probed", 0, 9, 0, func(s *State) float64 { return s.win.probed }},
	{"win.spreadAt", 0, 10, 0, func(s *State) float64 { return s.win.spreadAt }},
	{"win.spreadLeft", 0, 11, 0, func(s *State) float64 { return s.win.spreadLeft }},
	{"cut.r0", 0, 12, 0, func(s *State) float64 { return s.cut.r0 }},
	{"cut.wMax", 0, 13, 0, func(s *State) float64 { return s.cut.wMax }},
	{"cut.floor", 0, 14, 0, func(s *State) float64 { return s.cut.floor }},
	{"cut.at", 0, 15, 0, func(s *State) float64 { return s.cut.at }},
	{"cut.open", 0, 16, 0, func(s *State) float64 { return bit(s.cut.open) }},
	{"cut.last", 0, 17, 0, func(s *State) float64 { return s.cut.last }},
	{"cut.moved", 0, 18, 0, func(s *State) float64 { return bit(s.cut.moved) }},
	{"win.probeAt", 0, 19, 0, func(s *State) float64 { return s.win.probeAt }},
	{"credInt", 0, 20, 0, func(s *State) float64 { return s.credInt }},
	{"credTau", 0, 21, 0, func(s *State) float64 { return s.credTau }},
	{"spAt", 0, 22, 0, func(s *State) float64 { return s.spAt }},
	{"spK", 0, 23, 0, func(s *State) float64 { return s.spK }},
	{"spRho", 0, 24, 0, func(s *State) float64 { return s.spRho }},
	{"trim", 0, 25, 0, func(s *State) float64 { return s.trim }},
	{"trimGone", 0, 26, 0, func(s *State) float64 { return s.trimGone }},
	{"win.told", 0, 28, 0, func(s *State) float64 { return s.win.told }},
	{"win.rolls", 0, 29, 1, func(s *State) float64 { return bit(s.win.rolls) }},
	{"win.started", 0, 29, 2, func(s *State) float64 { return bit(s.win.started) }},
	{"win.length", 0, 29, 3, func(s *State) float64 { return s.win.length }},
	{"win.lo", 0, 29, 4, func(s *State) float64 { return s.win.lo }},
	{"win.hi", 0, 29, 5, func(s *State) float64 { return s.win.hi }},
	{"win.past", 0, 29, 6, func(s *State) float64 { return s.win.past }},
	{"win.sent0", 0, 29, 7, func(s *State) float64 { return s.win.sent0 }},
	{"win.first", 0, 29, 8, func(s *State) float64 { return s.win.first }},
	{"win.tight", 0, 29, 9, func(s *State) float64 { return bit(s.win.tight) }},
	{"win.miss", 0, 29, 10, func(s *State) float64 { return s.win.miss }},
	{"hb.on", 0, 30, 1, func(s *State) float64 { return bit(s.hb.on) }},
	{"hb.at", 0, 30, 2, func(s *State) float64 { return s.hb.at }},
	{"hb.n", 0, 30, 3, func(s *State) float64 { return s.hb.n }},
	{"hb.first", 0, 30, 4, func(s *State) float64 { return s.hb.first }},
	{"hb.end", 0, 30, 5, func(s *State) float64 { return s.hb.end }},
	{"hb.c0.q", 0, 30, 6, func(s *State) float64 { return s.hb.cycles[0].q }},
	{"hb.c0.w", 0, 30, 7, func(s *State) float64 { return s.hb.cycles[0].w }},
	{"hb.c0.lo", 0, 30, 8, func(s *State) float64 { return s.hb.cycles[0].lo }},
	{"hb.c1.q", 0, 30, 9, func(s *State) float64 { return s.hb.cycles[1].q }},
	{"hb.c1.w", 0, 30, 10, func(s *State) float64 { return s.hb.cycles[1].w }},
	{"hb.c1.lo", 0, 30, 11, func(s *State) float64 { return s.hb.cycles[1].lo }},
	{"hb.ended", 0, 30, 12, func(s *State) float64 { return float64(s.hb.ended) }},
	{"q2.rel", 0, SlotClasses, 1, func(s *State) float64 { return float64(s.q[2].rel) }},
	{"q2.end", 0, SlotClasses, 2, func(s *State) float64 { return float64(s.q[2].end) }},
	{"q3.rel", 0, SlotClasses, 3, func(s *State) float64 { return float64(s.q[3].rel) }},
	{"q3.end", 0, SlotClasses, 4, func(s *State) float64 { return float64(s.q[3].end) }},
	{"vb1", 0, SlotClasses, 5, func(s *State) float64 { return s.vb[1] }},
	{"vb2", 0, SlotClasses, 6, func(s *State) float64 { return s.vb[2] }},
	{"vb3", 0, SlotClasses, 7, func(s *State) float64 { return s.vb[3] }},
}

// Layout returns where the script keeps each field of fixed place (see
// Fields for the lists); the caller must not change it.
func Layout() []Slot { return layout }

// The x slots of the lists: each queue's holes and tickets of several
// units (pairs of end and units, 0 when empty), and the further limits.
const (
	SlotHoles0 = 1
	SlotBig0   = 2
	SlotHoles1 = 3
	SlotBig1   = 4
	SlotLimits = 27
	// The class queues (classes.go): slot SlotClasses holds the critical
	// and background queues' rel and end and the three virtual starts
	// (see Layout); their holes and tickets of several units are in the
	// slots after it, as the first two queues' are.
	SlotClasses = 31
	SlotHoles2  = 32
	SlotBig2    = 33
	SlotHoles3  = 34
	SlotBig3    = 35
)

// The further limits' slots in x's slot SlotLimits (flat: k, floor,
// version, spec, then 6 numbers a limit, then per queue its count and
// its tickets of 2 + k numbers: end, units, a cost each). A limit's six:
// its kind's code (KindBucket 0 … KindFirst 4), then a bucket: interval,
// τ, tat; a fixed or sliding window: length, count, window index, units
// in it, in the one before; a sliding log: length, {count, then time and
// units per entry, oldest first}, and two numbers derived from the log;
// a window aligned to first use: length, count, start/length (derived),
// units, start.
const LimitSlots = 6

// Fields returns s as named numbers: Layout's, then the lists (the
// holes and tickets of several units of each queue, the further limits,
// their floor and each queued ticket's costs), named by place.
func (s *State) Fields() []Field {
	out := make([]Field, 0, len(layout)+16)
	for _, f := range layout {
		out = append(out, Field{f.Name, f.get(s)})
	}
	for qi := range s.q {
		q := "q" + strconv.Itoa(qi)
		out = appendSpans(out, q+".holes", s.q[qi].holes)
		out = appendSpans(out, q+".big", s.q[qi].big)
	}
	x := s.x
	if x == nil {
		return out
	}
	out = append(out, Field{"x.floor", x.floor})
	for i := range x.lim {
		out = x.lim[i].appendFields(out, "x.lim["+strconv.Itoa(i)+"]")
	}
	for qi := range x.q {
		q := &x.q[qi]
		k := len(x.lim)
		for i := q.head; i < len(q.e); i++ {
			name := "x.q" + strconv.Itoa(qi) + "[" + strconv.Itoa(i-q.head) + "]"
			out = append(out, Field{name + ".e", float64(q.e[i])}, Field{name + ".n", float64(q.n[i])})
			for L, c := range q.cost(i, k) {
				out = append(out, Field{name + ".c" + strconv.Itoa(L), c})
			}
		}
	}
	return out
}

func appendSpans(out []Field, name string, sp []span) []Field {
	for i, h := range sp {
		n := name + "[" + strconv.Itoa(i) + "]"
		out = append(out, Field{n + ".end", float64(h.end)}, Field{n + ".n", float64(h.n)})
	}
	return out
}

// appendFields appends the limit's fields of its kind (see LimitSlots).
func (l *Limit) appendFields(out []Field, name string) []Field {
	f := func(n string, v float64) { out = append(out, Field{name + "." + n, v}) }
	f("kind", float64(l.kind))
	switch l.kind {
	case KindBucket:
		f("interval", l.interval)
		f("tau", l.tau)
		f("tat", l.tat)
	case KindFixed, KindSliding:
		f("w", l.w)
		f("q", l.q)
		f("idx", l.idx)
		f("cur", l.cur)
		f("prev", l.prev)
	case KindLog:
		f("w", l.w)
		f("q", l.q)
		for i, e := range l.log {
			n := "log[" + strconv.Itoa(i) + "]"
			f(n+".t", e.t)
			f(n+".c", e.c)
		}
	case KindFirst:
		f("w", l.w)
		f("q", l.q)
		f("cur", l.cur)
		f("start", l.start)
	}
	return out
}

// NoneTime is the script's time not set; Fields has −Inf there.
const NoneTime = -1e300

// FromNone maps the script's number v to Fields' (NoneTime, or anything
// the script derived from it by adding finite amounts, to −Inf).
func FromNone(v float64) float64 {
	if v <= NoneTime/10 {
		return math.Inf(-1)
	}
	return v
}
