package distributed

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttle-go/throttle/internal/schedule"
)

// The differential suite: random op sequences drive the engine
// (schedule.State.Apply) and the script against a real redis-server on a
// pinned clock, and every reply and the state after every op must be
// equal: the replies as the script's integers, the state field by field
// (schedule.State.Fields against the key's hash, luaFields), exactly.
// The script runs twice over, its fast paths on and off, so that the fast
// paths are proven equal to the general path as well.

// pinnedScript returns the schedule script with its clock taken from the
// call's last argument (removed from ARGV, so that #ARGV is as the ops
// expect), its TTLs left out (the pinned clock is not Redis's: a key must
// not expire in real time), a move recorded in the hash's field "moved"
// rather than published, and, if fast is false, its fast paths off. It
// fails tb if a pattern it replaces is not in the source.
func pinnedScript(tb testing.TB, fast bool) *redis.Script {
	tb.Helper()
	src := schedulePrelude + scheduleSrc
	replace := func(old, new string, n int) {
		tb.Helper()
		if c := strings.Count(src, old); c != n {
			tb.Fatalf("pinning the script: %q occurs %d times, want %d", old, c, n)
		}
		src = strings.ReplaceAll(src, old, new)
	}
	replace("local clock = redis.call('TIME')\nlocal now = tonumber(clock[1]) * SEC + tonumber(clock[2])\n",
		"local now = tonumber(table.remove(ARGV))\n", 1)
	replace("redis.call('PEXPIRE', key, ttlMs(newXe - now))", "", 2)
	replace("redis.call('PUBLISH', channel, s.id .. ' ' .. key)", "redis.call('HSET', key, 'moved', 1)", 1)
	// A refund's push is a move too (of the tickets behind it only).
	replace("redis.call('PUBLISH', channel, string.format('%d:%d:%d ', s.id, refundedAt[1], refundedAt[2]) .. key)", "redis.call('HSET', key, 'moved', 1)", 1)
	if !fast {
		replace("if tag == CORE.BARE and (op == 'wait' or op == 'try') and", "if false and", 1)
		replace("if tag == CORE.XC and op == 'mwait' and", "if false and", 1)
		replace("if tag == CORE.BARE and op == 'lease' then", "if false then", 1)
		replace("if op == 'mwait' and ARGV[A.WAIT_QUEUE] == QUEUE_ARG.FIRST and (ARGV[A.WAIT_KNOWN_ID] == ''", "if false and (ARGV[A.WAIT_KNOWN_ID] == ''", 1)
	}
	return redis.NewScript(mustExpand(src))
}

// lostID is a state id no state has (ids are µs of the clock): a ticket
// of it is of a state the store lost.
const lostID = "7"

// scriptArgs returns the script's arguments of op on a key of
// configuration c whose state id is id ("" if the key has none), the
// pinned clock's now last. known says whether a wait names the state it
// knows (else "").
func scriptArgs(c dcfg, id string, known bool, o dop) []any {
	opName := func(name string) string {
		if len(c.lims) > 0 {
			return "m" + name
		}
		return name
	}
	max := func(m float64) string {
		if math.IsInf(m, 1) {
			return ""
		}
		return fnum(m)
	}
	// seed returns what a wait or lease knew of a state the store lost:
	// its id ("": none), last turn and pause.
	seed := func(k *schedule.Known) (knownID, floor, hold any) {
		switch {
		case k != nil:
			return lostID, fnum(k.Floor), fnum(k.Hold)
		case known:
			return id, "", ""
		}
		return "", "", ""
	}
	xargs := func(cost []float64) (spec any, costs []any) {
		if len(c.lims) == 0 {
			return nil, nil
		}
		for _, v := range cost {
			costs = append(costs, fnum(v))
		}
		return c.spec(), costs
	}
	stateID := func(lost bool) string {
		if lost {
			return lostID
		}
		return id
	}
	var name string
	var args []any
	switch op := o.op.(type) {
	case schedule.Wait:
		name = opName("wait")
		a := waitArgs{N: op.N, Queue: op.Queue, Maxwait: max(op.MaxWait)}
		a.KnownID, a.KnownFloor, a.KnownHold = seed(op.Seed)
		if op.MaxQueued > 0 {
			a.Maxqueued = op.MaxQueued
		}
		if len(c.lims) == 0 {
			// As takeX sends them: a last turn and a pause not known
			// are left out.
			if a.KnownFloor == "" {
				a.KnownFloor = nil
			}
			if a.KnownHold == "" {
				a.KnownHold = nil
			}
		}
		a.Xspec, a.Xcost = xargs(op.Cost)
		args = a.append(nil)
	case schedule.Try:
		name = opName("try")
		a := waitArgs{N: op.N, Queue: op.Queue, Maxwait: "0"}
		a.KnownID, a.KnownFloor, a.KnownHold = seed(op.Seed)
		a.Xspec, a.Xcost = xargs(op.Cost)
		args = a.append(nil)
	case schedule.Turns:
		name = "turns"
		a := turnsArgs{ID: stateID(op.Lost)}
		for _, t := range op.Tickets {
			a.Tickets = append(a.Tickets, t.Queue, t.End)
		}
		args = a.append(nil)
	case schedule.Cancel:
		name = "cancel"
		args = cancelArgs{ID: stateID(op.Lost), Queue: op.Queue, End: op.End, N: op.N}.append(nil)
	case schedule.Pause:
		name = "pause"
		args = pauseArgs{D: fnum(op.D)}.append(nil)
	case schedule.Adapt:
		name = "adapt"
		args = adaptArgsOf(op, fnum).append(nil)
	case schedule.Settle:
		name = "settle"
		a := settleArgs{Spent: fnum(op.Spent), Actual: fnum(op.Actual)}
		if op.Diff != nil {
			name = "msettle"
			a.Xspec, a.Xcost = xargs(op.Diff)
		}
		args = a.append(nil)
	case schedule.Lease:
		name = "lease"
		a := leaseArgs{K: op.K, Need: op.Need, Maxwait: max(op.MaxWait), Rate: fnum(op.Rate), Late: fnum(op.Late)}
		a.KnownID, a.KnownFloor, a.KnownHold = seed(op.Seed)
		a.BackID = ""
		if len(op.Back) > 0 {
			a.BackID = stateID(op.BackLost)
			for _, e := range op.Back {
				a.Back = append(a.Back, e)
			}
		}
		args = a.append(nil)
	case schedule.StateView:
		name = "state"
		if op.Limits {
			name = "mstate"
			spec, _ := xargs(nil)
			args = stateArgs{Xspec: spec}.append(nil)
		}
	default:
		panic(fmt.Sprintf("op %T", o.op))
	}
	all := headerArgs{Op: name, Interval: fnum(c.iv), Burst: c.burstArg(), Channel: "diff"}.append(nil)
	return append(append(all, args...), fnum(o.now))
}

// wantReply returns the script's reply for the engine's r to op at now on
// the state id: the mapping of schedule.Reply's times to the script's µs
// (see schedule.Apply's doc).
func wantReply(op schedule.Op, r schedule.Reply, now float64, id int64) []int64 {
	const far = 1 << 62 // the script's FAR: its replies saturate there
	wo := func(t float64) int64 { return int64(min(schedule.WaitOf(now, t), far)) }
	rc := func(t float64) int64 {
		if math.IsInf(t, 1) {
			return -1
		}
		return wo(t)
	}
	n := int64(now)
	learned := func(out []int64) []int64 {
		if r.Learned {
			out = append(out, wo(r.Reset))
		}
		return out
	}
	switch op := op.(type) {
	case schedule.Wait:
		switch {
		case r.OK:
			return learned([]int64{1, wo(r.Turn), id, r.End, rc(r.Recheck), n})
		case r.Full:
			return []int64{2, wo(r.Turn), id, 0, -1, n}
		}
		return []int64{0, wo(r.Turn), id, 0, -1, n}
	case schedule.Try:
		if r.OK {
			return []int64{1, 0, id, r.End, -1, n}
		}
		return []int64{0, wo(r.Turn), id, 0, -1, n}
	case schedule.Turns:
		var out []int64
		for _, t := range r.Turns {
			switch {
			case math.IsNaN(t):
				out = append(out, -2)
			case math.IsInf(t, -1):
				out = append(out, -1)
			default:
				out = append(out, wo(t))
			}
		}
		return learned(append(out, rc(r.Recheck), n))
	case schedule.Cancel:
		if r.OK {
			return []int64{1}
		}
		return []int64{0}
	case schedule.Pause:
		return []int64{wo(r.Until)}
	case schedule.Adapt:
		return []int64{wo(r.Until)}
	case schedule.Settle:
		var out []int64
		for _, d := range r.Dropped {
			out = append(out, int64(min(d, far)))
		}
		return out
	case schedule.Lease:
		if !r.OK {
			w := int64(0)
			if len(r.Turns) > 0 {
				w = wo(r.Turns[0])
			}
			return learned([]int64{0, id, 0, -1, n, w})
		}
		out := []int64{int64(len(r.Turns)), id, r.End, rc(r.Recheck), n}
		for _, t := range r.Turns {
			out = append(out, wo(t))
		}
		return learned(out)
	case schedule.StateView:
		fixed := func(x, scale float64) int64 {
			if math.IsInf(x, 1) {
				return 1 << 53
			}
			return int64(max(min(math.Floor(x*scale), far), -far))
		}
		if op.Limits {
			var out []int64
			for _, v := range r.Views {
				out = append(out, fixed(v.Remaining, 1e6))
			}
			return append(out, n)
		}
		v := r.View
		flag := func(b bool) int64 {
			if b {
				return 1
			}
			return 0
		}
		rate := int64(0)
		if v.Interval > 0 {
			rate = int64(min(math.Floor(1e6/v.Interval*1e6+0.5), far))
		}
		var left, reset int64
		if v.Window {
			left, reset = fixed(v.WindowLeft, 1e6), wo(v.WindowReset)
		}
		return []int64{fixed(v.Tokens, 1e6), fixed(v.Remaining, 1), wo(v.Next), wo(v.Hold), int64(v.Queued), rate,
			fixed(v.Burst, 1e6), flag(v.Cut), flag(v.Window), left, reset, int64(v.Critical), int64(v.Background), n}
	}
	panic(fmt.Sprintf("op %T", op))
}

// diffFields returns the fields whose values differ (== or both NaN is
// equal), and those only one side has, one line each.
func diffFields(goF, luaF []schedule.Field) []string {
	same := len(goF) == len(luaF)
	for i := 0; same && i < len(goF); i++ {
		g, l := goF[i], luaF[i]
		same = g.Name == l.Name && (g.Value == l.Value || math.IsNaN(g.Value) && math.IsNaN(l.Value))
	}
	if same {
		return nil
	}
	lua := make(map[string]float64, len(luaF))
	for _, f := range luaF {
		lua[f.Name] = f.Value
	}
	var out []string
	seen := make(map[string]bool, len(goF))
	for _, f := range goF {
		seen[f.Name] = true
		v, ok := lua[f.Name]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s: go %v, script has none", f.Name, f.Value))
		case v != f.Value && !(math.IsNaN(v) && math.IsNaN(f.Value)):
			out = append(out, fmt.Sprintf("%s: go %v, script %v (%+g)", f.Name, f.Value, v, v-f.Value))
		}
	}
	for _, f := range luaF {
		if !seen[f.Name] {
			out = append(out, fmt.Sprintf("%s: script %v, go has none", f.Name, f.Value))
		}
	}
	return out
}

// dseq is one sequence in flight: its key, configuration, generator, the
// engine's state, and the ops so far.
type dseq struct {
	key  string
	c    dcfg
	g    gen
	s    schedule.State
	ops  []dop
	id   string // the script's state id; "" while the key has none
	fail string
}

// check applies the sequence's op o to the engine, and compares its reply
// and state with the script's (reply, err; h the hash after it).
func (q *dseq) check(o dop, reply any, err error, h map[string]string) string {
	r := q.s.Apply(o.now, q.c.conf(), o.op)
	if err != nil {
		return fmt.Sprintf("script error: %v", err)
	}
	got, ok := scriptInts(reply)
	if !ok {
		return fmt.Sprintf("script reply %v", reply)
	}
	id := int64(0)
	if len(got) > 2 {
		switch o.op.(type) {
		case schedule.Wait, schedule.Try:
			id = got[2]
		case schedule.Lease:
			id = got[1]
		}
	}
	want := wantReply(o.op, r, o.now, id)
	var msgs []string
	if !slices.Equal(got, want) {
		msgs = append(msgs, fmt.Sprintf("reply: script %v, go %v (go %+v)", got, want, r))
	}
	if len(h) == 0 {
		// The script kept no state (a give-back or a refused try on a key
		// without one): the engine's must be a new key's, which a store
		// may forget (Idle), and it is forgotten.
		if !q.s.Idle(o.now, q.c.conf()) {
			msgs = append(msgs, "state: the script keeps none, the engine's is not idle")
		}
		q.s.Init(q.c.limits())
	}
	luaF, err := luaFields(h)
	if err != nil {
		return fmt.Sprintf("reading the hash: %v", err)
	}
	for _, d := range diffFields(q.untouchedX(q.s.Fields(), luaF), luaF) {
		msgs = append(msgs, "state "+d)
	}
	if _, moved := h["moved"]; moved != r.Moved {
		msgs = append(msgs, fmt.Sprintf("moved: script %v, go %v", moved, r.Moved))
	}
	if _, view := o.op.(schedule.StateView); !view && len(h) > 0 && len(q.c.lims) == 0 && len(q.ops)%4 == 0 {
		// The TTL: Redis forgets the state at xe (the core's 14th
		// number); the engine must find it a new key's by then, else a
		// store's expiry would drop a state that still paces.
		c := h["c"]
		xe := math.Float64frombits(binary.LittleEndian.Uint64([]byte(c[1+8*13 : 9+8*13])))
		// Time passes without ops until xe, the queued units going at
		// their turns (advanced at each one, at the cut's steps, and each
		// quarter second), not late at xe.
		later := q.s // no further limits: Advance writes none of what they share
		cf := q.c.conf()
		for t := o.now; t < xe; {
			next := min(xe, t+250000, later.Recheck(t, cf))
			if n := later.Queued(); n > 0 {
				if turn := later.TurnAt(t, cf, 1); turn > t {
					next = min(next, turn)
				}
			}
			t = next
			later.Advance(t, cf)
		}
		if !later.Idle(xe, q.c.conf()) {
			msgs = append(msgs, fmt.Sprintf("ttl: the script's state expires %.0f µs from now, where the engine's is not idle", xe-o.now))
		}
	}
	q.g.saw(o, r)
	q.id = ""
	if c, ok := h["c"]; ok && len(c) >= 9 {
		q.id = fnum(luaCoreID(c))
	}
	return strings.Join(msgs, "\n\t")
}

// untouchedX maps a representation: the script makes a key's further
// limits at its first op that names them (mwait, mtry, msettle,
// mstate), the engine at Init. Until then the script has none, and the
// engine's are as Init made them but their floor (which bounds queued
// turns only, and the first ticket moves to its own time): goF is
// returned without them.
func (q *dseq) untouchedX(goF, luaF []schedule.Field) []schedule.Field {
	if len(q.c.lims) == 0 {
		return goF
	}
	for _, f := range luaF {
		if strings.HasPrefix(f.Name, "x.") {
			return goF
		}
	}
	var fresh schedule.State
	fresh.Init(q.c.limits())
	freshX := map[string]float64{}
	for _, f := range fresh.Fields() {
		if strings.HasPrefix(f.Name, "x.") && f.Name != "x.floor" {
			freshX[f.Name] = f.Value
		}
	}
	var out []schedule.Field
	for _, f := range goF {
		if !strings.HasPrefix(f.Name, "x.") {
			out = append(out, f)
			continue
		}
		if v, ok := freshX[f.Name]; f.Name != "x.floor" && (!ok || v != f.Value) {
			return goF // touched: compared as it is
		}
	}
	return out
}

// luaCoreID returns the state id a core holds.
func luaCoreID(c string) float64 {
	return math.Float64frombits(binary.LittleEndian.Uint64([]byte(c[1:9])))
}

// prepare sets the op's arguments that depend on the script's state: a
// key without state has no tickets to name.
func (q *dseq) prepare(o dop) dop {
	if q.id != "" {
		return o
	}
	switch op := o.op.(type) {
	case schedule.Cancel:
		op.Lost = true
		o.op = op
	case schedule.Turns:
		op.Lost = true
		o.op = op
	case schedule.Lease:
		op.BackLost = true
		o.op = op
	}
	return o
}

// coverage counts the ops after which the state had each feature: so
// that a run shows it reached them.
type coverage map[string]int

func (cv coverage) count(fs []schedule.Field) {
	waiting := 0 // the class queues with units queued (holes aside)
	for _, f := range fs {
		if q, ok := strings.CutSuffix(f.Name, ".end"); ok && (q == "q1" || q == "q2" || q == "q3") {
			for _, g := range fs {
				if g.Name == q+".rel" && g.Value < f.Value {
					waiting++
				}
			}
		}
	}
	if waiting > 1 {
		cv["classes>1"]++
	}
	for _, f := range fs {
		switch {
		case f.Value == 0:
		case f.Name == "win.valid", f.Name == "win.rolls", f.Name == "win.started", f.Name == "win.tight",
			f.Name == "cut.r0", f.Name == "trim", f.Name == "hb.on", f.Name == "win.probed", f.Name == "win.spreadLeft",
			f.Name == "hold", f.Name == "vb1", f.Name == "vb2", f.Name == "vb3":
			cv[f.Name]++
		case f.Name == "hb.ended" && f.Value >= 2:
			cv["hb.ended>=2"]++
		case strings.HasSuffix(f.Name, ".holes[0].n"), strings.HasSuffix(f.Name, ".big[0].n"), strings.HasSuffix(f.Name, "log[1].t"):
			cv[f.Name[strings.IndexByte(f.Name, '.')+1:]]++
		}
	}
}

// diffRun runs n sequences of up to length ops each, par at a time,
// pipelining one op of each per round trip. It returns the ops run and the
// first failure (a sequence, the failing op's index, what differed).
func diffRun(tb testing.TB, c *redis.Client, script *redis.Script, seed uint64, n, par, length int, prefix string, cv coverage) (ops int, fail *dseq, at int) {
	exact := os.Getenv("THROTTLE_DIFF_EXACT") != ""
	ctx := context.Background()
	if err := script.Load(ctx, c).Err(); err != nil {
		tb.Fatalf("loading the script: %v", err)
	}
	next := 0
	newSeq := func() *dseq {
		r := rand.New(rand.NewPCG(seed, uint64(next)))
		cfg := genConfig(r, r.IntN(3) == 0, exact)
		q := &dseq{key: fmt.Sprintf("{%s}:%d:%d", prefix, seed, next), c: cfg}
		q.g = gen{r: r, c: cfg, now: 1.7e15 + float64(r.IntN(1e12))}
		if len(cfg.lims) == 0 && r.IntN(4) == 0 {
			q.g.budget = 3 + r.IntN(20)
		}
		q.s.Init(cfg.limits())
		next++
		return q
	}
	var live []*dseq
	for len(live) < par && next < n {
		live = append(live, newSeq())
	}
	for len(live) > 0 {
		pipe := c.Pipeline()
		type call struct {
			o   dop
			ev  *redis.Cmd
			hg  *redis.MapStringStringCmd
			seq *dseq
		}
		calls := make([]call, len(live))
		for i, q := range live {
			o := q.prepare(q.g.next())
			if o.c != nil {
				q.c = *o.c
			}
			known := q.id != "" && q.g.r.IntN(2) == 0
			args := scriptArgs(q.c, q.id, known, o)
			calls[i] = call{o: o, seq: q}
			calls[i].ev = script.EvalSha(ctx, pipe, []string{q.key}, args...)
			calls[i].hg = pipe.HGetAll(ctx, q.key)
			pipe.HDel(ctx, q.key, "moved")
		}
		_, _ = pipe.Exec(ctx)
		var keep []*dseq
		for _, cl := range calls {
			q := cl.seq
			q.ops = append(q.ops, cl.o)
			ops++
			h, err := cl.hg.Result()
			if err != nil {
				tb.Fatalf("HGETALL: %v", err)
			}
			if msg := q.check(cl.o, cl.ev.Val(), cl.ev.Err(), h); msg != "" {
				q.fail = msg
				return ops, q, len(q.ops) - 1
			}
			if cv != nil && ops%7 == 0 {
				cv.count(q.s.Fields())
			}
			if len(q.ops) < length {
				keep = append(keep, q)
			} else if next < n {
				keep = append(keep, newSeq())
			}
		}
		live = keep
	}
	return ops, nil, 0
}

// replay runs ops on a fresh key of configuration c, one at a time, and
// returns the index of the first op where the engine and the script
// differ, and what differed; -1 if none.
func replay(tb testing.TB, c *redis.Client, script *redis.Script, cfg dcfg, ops []dop, key string) (int, string) {
	ctx := context.Background()
	c.Del(ctx, key)
	q := &dseq{key: key, c: cfg}
	q.s.Init(cfg.limits())
	q.g = gen{r: rand.New(rand.NewPCG(1, 1)), c: cfg}
	for i, o := range ops {
		o = q.prepare(o)
		if o.c != nil {
			q.c = *o.c
		}
		ev := script.Run(ctx, c, []string{key}, scriptArgs(q.c, q.id, false, o)...)
		h, err := c.HGetAll(ctx, key).Result()
		if err != nil {
			tb.Fatalf("HGETALL: %v", err)
		}
		c.HDel(ctx, key, "moved")
		if msg := q.check(o, ev.Val(), ev.Err(), h); msg != "" {
			return i, msg
		}
	}
	return -1, ""
}

// shrink returns a short sequence that still fails: greedily, ops are
// dropped while one still differs.
func shrink(tb testing.TB, c *redis.Client, script *redis.Script, cfg dcfg, ops []dop, key string) ([]dop, string) {
	i, msg := replay(tb, c, script, cfg, ops, key)
	if i < 0 {
		return ops, "(does not fail when replayed alone)"
	}
	ops = ops[:i+1]
	first := 0
	if len(cfg.lims) > 0 {
		first = 1 // the op that names the further limits stays (see gen.next)
	}
	for chunk := len(ops) / 2; chunk >= 1; chunk /= 2 {
		for j := first; j+chunk <= len(ops); {
			cand := append(append([]dop(nil), ops[:j]...), ops[j+chunk:]...)
			if k, m := replay(tb, c, script, cfg, cand, key); k >= 0 {
				ops, msg = cand[:k+1], m
				continue
			}
			j++
		}
	}
	return ops, msg
}

// reproduction prints a failing sequence as a table: its configuration,
// and each op at its time from the first.
func reproduction(cfg dcfg, ops []dop, msg string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "config: %v\n", cfg)
	t0 := ops[0].now
	for i, o := range ops {
		fmt.Fprintf(&b, "%3d  +%.0fµs  %T%+v", i, o.now-t0, o.op, o.op)
		if o.c != nil {
			fmt.Fprintf(&b, "  under %v", *o.c)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "at op %d:\n\t%s", len(ops)-1, msg)
	return b.String()
}

// TestScheduleMatchesScript is the differential suite: the engine and the
// script, fast paths on and off, on the same random ops at the same
// times, equal reply for reply and field for field. THROTTLE_LONG=1 runs
// ten times as many.
func TestScheduleMatchesScript(t *testing.T) {
	n, length := 900, 60
	if os.Getenv("THROTTLE_LONG") != "" {
		n *= 10
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("THROTTLE_DIFF_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	for _, fast := range []bool{true, false} {
		name := "fast"
		if !fast {
			name = "general"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel() // a server each: the machine's cores
			_, c := startRedis(t)
			script := pinnedScript(t, fast)
			start := time.Now()
			cv := coverage{}
			ops, fail, at := diffRun(t, c, script, seed, n, 400, length, name, cv)
			el := time.Since(start)
			t.Logf("seed %d: %d ops of %d sequences in %v: %.0f ops/s, %.0f sequences/s", seed, ops, n, el.Round(time.Millisecond),
				float64(ops)/el.Seconds(), float64(n)/el.Seconds())
			t.Logf("states seen (1 op in 7): %v", map[string]int(cv))
			if fail != nil {
				t.Logf("sequence %s failed at op %d (%v):\n\t%s", fail.key, at, fail.ops[at], fail.fail)
				small, msg := shrink(t, c, script, fail.c, fail.ops, fail.key+":shrink")
				t.Fatalf("THROTTLE_DIFF_SEED=%d: the engine and the script differ; shrunk to %d ops:\n%s", seed, len(small), reproduction(fail.c, small, msg))
			}
		})
	}
}
