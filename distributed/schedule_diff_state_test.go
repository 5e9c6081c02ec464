package distributed

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"

	"github.com/throttle-go/throttle/internal/schedule"
)

// The differential suite's reading of a key's hash (schedule.lua's core
// c and x) as schedule.State.Fields names it, by schedule.Layout.

// coreDoubles is the number of doubles in a core after its tag.
const coreDoubles = 17

// luaFields decodes the hash h (field → value, as HGETALL returns it) into
// State.Fields' names and values; an absent key (h empty) is the state
// the script reads for it. It fails on a form it does not know.
func luaFields(h map[string]string) ([]schedule.Field, error) {
	var core []float64
	var a []any // x's slots, a[0] being slot 1
	if c, ok := h["c"]; !ok {
		// A new state (schedule.lua's n0): id, tat NONE, hold 0, …, lastGo NONE.
		core = make([]float64, coreDoubles)
		core[1], core[8] = schedule.NoneTime, schedule.NoneTime
	} else {
		if len(c) < 1+8*coreDoubles {
			return nil, fmt.Errorf("core of %d bytes", len(c))
		}
		tag := c[0]
		core = make([]float64, coreDoubles)
		for i := range core {
			core[i] = math.Float64frombits(binary.LittleEndian.Uint64([]byte(c[1+8*i : 9+8*i])))
		}
		rest := c[1+8*coreDoubles:]
		z := 0
		for z < len(rest) && rest[z] != 0 {
			z++
		}
		if z == len(rest) {
			return nil, fmt.Errorf("core's tail not terminated")
		}
		rest = rest[z+1:]
		switch tag {
		case coreBare:
			if len(rest) != 0 {
				return nil, fmt.Errorf("bare core with %d bytes after its tail", len(rest))
			}
		case coreX:
			x, ok := h["x"]
			if !ok {
				return nil, fmt.Errorf("core of tag %d without x", tag)
			}
			v, n, err := msgpackDecode([]byte(x))
			if err != nil {
				return nil, fmt.Errorf("x: %v", err)
			}
			if n != len(x) {
				return nil, fmt.Errorf("x: %d bytes after its value", len(x)-n)
			}
			if a, ok = v.([]any); !ok {
				return nil, fmt.Errorf("x is %T", v)
			}
		case coreXc:
			var err error
			if a, err = shortX(rest, core); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("core of tag %d", tag)
		}
		if _, ok := h["x"]; ok && tag != coreX {
			return nil, fmt.Errorf("core of tag %d beside a field x", tag)
		}
	}
	slot := func(i int) any {
		if i-1 < len(a) {
			return a[i-1]
		}
		return nil
	}
	num := func(v any) float64 {
		if f, ok := v.(float64); ok {
			return f
		}
		return 0 // nil, or a table where a number may be (0 written for none)
	}
	var out []schedule.Field
	for _, f := range schedule.Layout() {
		var v float64
		switch {
		case f.Core > 0:
			v = core[f.Core-1]
		case f.Sub == 0:
			v = num(slot(f.X))
		default:
			if t, ok := slot(f.X).([]any); ok && f.Sub-1 < len(t) {
				v = num(t[f.Sub-1])
			}
		}
		out = append(out, schedule.Field{Name: f.Name, Value: schedule.FromNone(v)})
	}
	for qi, slots := range [schedule.Queues][2]int{
		{schedule.SlotHoles0, schedule.SlotBig0}, {schedule.SlotHoles1, schedule.SlotBig1},
		{schedule.SlotHoles2, schedule.SlotBig2}, {schedule.SlotHoles3, schedule.SlotBig3},
	} {
		for j, name := range []string{".holes", ".big"} {
			t, _ := slot(slots[j]).([]any)
			for i := 0; i+1 < len(t); i += 2 {
				n := "q" + strconv.Itoa(qi) + name + "[" + strconv.Itoa(i/2) + "]"
				out = append(out, schedule.Field{Name: n + ".end", Value: num(t[i])}, schedule.Field{Name: n + ".n", Value: num(t[i+1])})
			}
		}
	}
	m, ok := slot(schedule.SlotLimits).([]any)
	if !ok {
		return out, nil
	}
	return limitFields(out, m)
}

// limitFields appends the further limits of x's slot (see
// schedule.LimitSlots) as State.Fields names them.
func limitFields(out []schedule.Field, m []any) ([]schedule.Field, error) {
	at := func(i int) float64 { // 1-based, as the script's
		if i-1 < len(m) {
			if f, ok := m[i-1].(float64); ok {
				return f
			}
		}
		return math.NaN()
	}
	k := int(at(1))
	out = append(out, schedule.Field{Name: "x.floor", Value: schedule.FromNone(at(2))})
	i := 5
	for L := range k {
		name := "x.lim[" + strconv.Itoa(L) + "]."
		f := func(n string, v float64) {
			out = append(out, schedule.Field{Name: name + n, Value: schedule.FromNone(v)})
		}
		kind := at(i)
		f("kind", kind)
		switch kind {
		case schedule.KindBucket:
			f("interval", at(i+1))
			f("tau", at(i+2))
			f("tat", at(i+3))
		case schedule.KindFixed, schedule.KindSliding:
			f("w", at(i+1))
			f("q", at(i+2))
			f("idx", at(i+3))
			f("cur", at(i+4))
			f("prev", at(i+5))
		case schedule.KindLog:
			f("w", at(i+1))
			g, ok := m[i+1].([]any)
			if !ok || len(g)%2 != 1 {
				return nil, fmt.Errorf("limit %d: a log of %T", L, m[i+1])
			}
			f("q", g[0].(float64))
			for j := 1; j+1 < len(g); j += 2 {
				n := "log[" + strconv.Itoa(j/2) + "]"
				f(n+".t", g[j].(float64))
				f(n+".c", g[j+1].(float64))
			}
		case schedule.KindFirst:
			f("w", at(i+1))
			f("q", at(i+2))
			f("cur", at(i+4))
			f("start", at(i+5))
		default:
			return nil, fmt.Errorf("limit %d of kind %v", L, kind)
		}
		i += schedule.LimitSlots
	}
	for qi := range schedule.Queues {
		cnt := 0 // a count not there (a state written before classes): none
		if v := at(i); !math.IsNaN(v) {
			cnt = int(v)
		}
		i++
		for t := range cnt {
			name := "x.q" + strconv.Itoa(qi) + "[" + strconv.Itoa(t) + "]"
			out = append(out, schedule.Field{Name: name + ".e", Value: at(i)}, schedule.Field{Name: name + ".n", Value: at(i + 1)})
			for L := range k {
				out = append(out, schedule.Field{Name: name + ".c" + strconv.Itoa(L), Value: at(i + 2 + L)})
			}
			i += 2 + k
		}
	}
	return out, nil
}

// shortX reads x's short form after a core of tag CORE_XC into x's slots,
// as schedule_state.lua does: slots 5–26 zero but the pace last in force
// (the core's configuration), and slot 27 the limits.
func shortX(b string, core []float64) ([]any, error) {
	d := func(i int) float64 { return math.Float64frombits(binary.LittleEndian.Uint64([]byte(b[8*i : 8*i+8]))) }
	if len(b) < 16 {
		return nil, fmt.Errorf("short x of %d bytes", len(b))
	}
	k := int(d(0))
	if len(b) < 8*(2+6*k) {
		return nil, fmt.Errorf("short x of %d limits in %d bytes", k, len(b))
	}
	a := make([]any, 27)
	for j := 5; j <= 26; j++ {
		a[j-1] = 0.0
	}
	a[19], a[20] = core[15], core[16]
	f := []any{float64(k), d(1), 0.0, ""}
	for j := 2; j < 2+6*k; j++ {
		f = append(f, d(j))
	}
	for range schedule.Queues {
		f = append(f, 0.0) // each queue's count of tickets
	}
	a[26] = f
	return a, nil
}

// msgpackDecode decodes one MessagePack value of b (the forms cmsgpack
// writes: integers, floats, strings, arrays, maps, nil, booleans) as
// float64, string, []any, map[any]any, nil or bool, and returns the bytes
// it read.
func msgpackDecode(b []byte) (any, int, error) {
	if len(b) == 0 {
		return nil, 0, fmt.Errorf("msgpack: short")
	}
	need := func(n int) error {
		if len(b) < n {
			return fmt.Errorf("msgpack: short")
		}
		return nil
	}
	t := b[0]
	be := binary.BigEndian
	switch {
	case t <= 0x7f:
		return float64(t), 1, nil
	case t >= 0xe0:
		return float64(int8(t)), 1, nil
	case t&0xf0 == 0x90:
		return msgpackArray(b[1:], int(t&0x0f), 1)
	case t&0xf0 == 0x80:
		return msgpackMap(b[1:], int(t&0x0f), 1)
	case t&0xe0 == 0xa0:
		n := int(t & 0x1f)
		if err := need(1 + n); err != nil {
			return nil, 0, err
		}
		return string(b[1 : 1+n]), 1 + n, nil
	}
	switch t {
	case 0xc0:
		return nil, 1, nil
	case 0xc2, 0xc3:
		return t == 0xc3, 1, nil
	case 0xca:
		if err := need(5); err != nil {
			return nil, 0, err
		}
		return float64(math.Float32frombits(be.Uint32(b[1:]))), 5, nil
	case 0xcb:
		if err := need(9); err != nil {
			return nil, 0, err
		}
		return math.Float64frombits(be.Uint64(b[1:])), 9, nil
	case 0xcc, 0xd0:
		if err := need(2); err != nil {
			return nil, 0, err
		}
		if t == 0xcc {
			return float64(b[1]), 2, nil
		}
		return float64(int8(b[1])), 2, nil
	case 0xcd, 0xd1:
		if err := need(3); err != nil {
			return nil, 0, err
		}
		if t == 0xcd {
			return float64(be.Uint16(b[1:])), 3, nil
		}
		return float64(int16(be.Uint16(b[1:]))), 3, nil
	case 0xce, 0xd2:
		if err := need(5); err != nil {
			return nil, 0, err
		}
		if t == 0xce {
			return float64(be.Uint32(b[1:])), 5, nil
		}
		return float64(int32(be.Uint32(b[1:]))), 5, nil
	case 0xcf, 0xd3:
		if err := need(9); err != nil {
			return nil, 0, err
		}
		if t == 0xcf {
			return float64(be.Uint64(b[1:])), 9, nil
		}
		return float64(int64(be.Uint64(b[1:]))), 9, nil
	case 0xd9, 0xda, 0xdb:
		w := map[byte]int{0xd9: 1, 0xda: 2, 0xdb: 4}[t]
		if err := need(1 + w); err != nil {
			return nil, 0, err
		}
		n := msgpackLen(b[1:], w)
		if err := need(1 + w + n); err != nil {
			return nil, 0, err
		}
		return string(b[1+w : 1+w+n]), 1 + w + n, nil
	case 0xdc, 0xdd:
		w := 2
		if t == 0xdd {
			w = 4
		}
		if err := need(1 + w); err != nil {
			return nil, 0, err
		}
		return msgpackArray(b[1+w:], msgpackLen(b[1:], w), 1+w)
	case 0xde, 0xdf:
		w := 2
		if t == 0xdf {
			w = 4
		}
		if err := need(1 + w); err != nil {
			return nil, 0, err
		}
		return msgpackMap(b[1+w:], msgpackLen(b[1:], w), 1+w)
	}
	return nil, 0, fmt.Errorf("msgpack: type 0x%x", t)
}

func msgpackLen(b []byte, w int) int {
	switch w {
	case 1:
		return int(b[0])
	case 2:
		return int(binary.BigEndian.Uint16(b))
	}
	return int(binary.BigEndian.Uint32(b))
}

func msgpackArray(b []byte, n, head int) (any, int, error) {
	out := make([]any, n)
	off := 0
	for i := range out {
		v, m, err := msgpackDecode(b[off:])
		if err != nil {
			return nil, 0, err
		}
		out[i], off = v, off+m
	}
	return out, head + off, nil
}

func msgpackMap(b []byte, n, head int) (any, int, error) {
	out := make(map[any]any, n)
	off := 0
	for range n {
		k, m, err := msgpackDecode(b[off:])
		if err != nil {
			return nil, 0, err
		}
		off += m
		v, m, err := msgpackDecode(b[off:])
		if err != nil {
			return nil, 0, err
		}
		off += m
		out[k] = v
	}
	return out, head + off, nil
}
