package distributed

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/internal/schedtest"
)

// settledSleepers reports how many waits of rkey sleep in q, and whether
// every one of them knows its turn as it stands: no ask due, in flight
// or unread, and the subscription up since it was learned.
func settledSleepers(q *Limiter, rkey string) (n int, settled bool) {
	p := &q.pushes
	p.mu.Lock()
	var ss []*sleeper
	for s := range p.sleepers {
		if s.w != nil && s.rkey == rkey {
			ss = append(ss, s)
		}
	}
	p.mu.Unlock()
	for _, s := range ss {
		if !p.settled(s) {
			return len(ss), false
		}
	}
	return len(ss), true
}

// listen subscribes q to its pushed moves, as its first sleeping wait
// would, and polls until the subscription is up (fails the test after
// 5 s); it ends a second after the test's last sleeping wait.
func listen(t *testing.T, q *Limiter) {
	t.Helper()
	s := q.pushes.add(q, "")
	defer q.pushes.remove(s)
	for deadline := time.Now().Add(5 * time.Second); !subscribed(q); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("not subscribed after 5 s")
		}
	}
}

// awaitPush polls until q has been delivered a push after gen (fails the
// test after 5 s).
func awaitPush(t *testing.T, q *Limiter, gen uint64) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); q.pushes.gen.Load() == gen; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no push after 5 s")
		}
	}
}

// awaitSettled polls until n waits of rkey sleep in q, each knowing its
// turn (see settledSleepers), and fails the test after 5 s.
func awaitSettled(t *testing.T, q *Limiter, rkey string, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; {
		got, ok := settledSleepers(q, rkey)
		if got == n && ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d waits sleeping (settled: %v); want %d settled", got, ok, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestPushAskedOncePerProcess: twenty waits of one process sleep on turns
// a second apart; another process pauses the key. The push costs the
// sleeping process one call (op turns) for all of them. Calls are counted
// by Redis (INFO commandstats), once every sleeper has learned its turn,
// so the count is exact; the waits are cancelled at the end.
func TestPushAskedOncePerProcess(t *testing.T) {
	s, c := startRedis(t)
	c2 := newClient(t, s.Addr())
	q := New(c, "asked-once", throttle.Limit{Rate: 1, Burst: 1})
	pauser := New(c2, "asked-once", throttle.Limit{Rate: 1, Burst: 1})
	q.MaxLease = 1                                       // waits of their own (leased turns: TestLeaseKeptAfterMove)
	q.Timeout, pauser.Timeout = time.Second, time.Second // a busy machine is no outage
	defer q.Close()
	defer pauser.Close()
	w := q.For("k").(*keyWaiter)
	ctx, cancel := context.WithCancel(context.Background())
	if err := w.WaitN(ctx, 1); err != nil { // spend the burst
		t.Fatal(err)
	}
	listen(t, q)
	const waits = 20
	var wg sync.WaitGroup
	errs := make([]error, waits)
	for i := range waits {
		wg.Go(func() { _, errs[i] = w.waitN(ctx, 1) })
	}
	awaitSettled(t, q, w.rkey, waits)
	before, gen := scriptCalls(t, c), q.pushes.gen.Load()
	if err := pauser.For("k").(*keyWaiter).Pause(context.Background(), 500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	awaitPush(t, q, gen)
	awaitSettled(t, q, w.rkey, waits)
	if calls := scriptCalls(t, c) - before; calls != 2 {
		t.Errorf("%d script calls for a pause pushed to %d sleeping waits; want 2 (the pause, one ask)", calls, waits)
	}
	cancel()
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("wait %d: %v; want context.Canceled", i, err)
		}
	}
}

// TestPushRefundAsksBehindOnly: ten waits of one process (A) sleep on
// turns a second apart, then one of another process (B), then one more of
// A (cancelled at the end). B's wait is cancelled:
// its ticket becomes a hole, and only the wait behind it moves (earlier).
// A asks that wait's turn alone: one call; the ten ahead ask nothing. A
// cancel of the queue's last ticket moves no turn and is not pushed: no
// ask at all.
func TestPushRefundAsksBehindOnly(t *testing.T) {
	s, c := startRedis(t)
	cb := newClient(t, s.Addr())
	qa := New(c, "refund-behind", throttle.Limit{Rate: 1, Burst: 1})
	qb := New(cb, "refund-behind", throttle.Limit{Rate: 1, Burst: 1})
	qa.MaxLease, qb.MaxLease = 1, 1                   // waits of their own
	qa.Timeout, qb.Timeout = time.Second, time.Second // a busy machine is no outage
	defer qa.Close()
	defer qb.Close()
	wa, wb := qa.For("k").(*keyWaiter), qb.For("k").(*keyWaiter)
	ctx, cancel := context.WithCancel(context.Background())
	if err := wa.WaitN(ctx, 1); err != nil { // spend the burst
		t.Fatal(err)
	}
	listen(t, qa)
	listen(t, qb)
	var wg sync.WaitGroup
	errs := make(chan error, 13)
	// start starts a wait of w and polls until the n-th wait of w's
	// process sleeps, knowing its turn; the returned function waits for
	// the wait to end, and for the refund of its ticket if it was
	// cancelled.
	start := func(w *keyWaiter, ctx context.Context, n int) func() {
		done := make(chan struct{})
		wg.Go(func() {
			defer close(done)
			if _, err := w.waitN(ctx, 1); err != nil && !errors.Is(err, context.Canceled) {
				errs <- err
			}
		})
		awaitSettled(t, w.q, w.rkey, n)
		return func() { <-done; w.q.refunds.Wait() }
	}
	for i := range 10 {
		start(wa, ctx, i+1)
	}
	bctx, cancelB := context.WithCancel(ctx)
	b := start(wb, bctx, 1)
	start(wa, ctx, 11)
	before, gen := scriptCalls(t, c), qa.pushes.gen.Load()
	cancelB() // a hole: the last wait of A moves up
	b()
	awaitPush(t, qa, gen)
	awaitSettled(t, qa, wa.rkey, 11)
	if calls := scriptCalls(t, c) - before; calls != 2 {
		t.Errorf("%d script calls for a refund ahead of 1 of 11 sleeping waits; want 2 (the cancel, one ask)", calls)
	}

	lctx, cancelLast := context.WithCancel(ctx)
	last := start(wb, lctx, 1)
	before, pubs := scriptCalls(t, c), commandStats(t, s)["publish"]
	cancelLast() // the queue's last ticket: nothing moves
	last()
	if n := commandStats(t, s)["publish"] - pubs; n != 0 {
		t.Errorf("%d pushes for a refund of the queue's last ticket; want none", n)
	}
	awaitSettled(t, qa, wa.rkey, 11)
	if calls := scriptCalls(t, c) - before; calls != 1 {
		t.Errorf("%d script calls for a refund of the queue's last ticket; want 1 (the cancel)", calls)
	}
	cancel() // the waits of A
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestCancelsAndPausesNeverOver: two processes (two Limiters, each its own
// client and subscription) share one key at 100/s, burst 5. 360 waits of
// 1 to 3 units arrive over 3 s, two by two to each process in turn; half
// are cancelled while they sleep (after 0 to 1 s), and one process pauses
// the key for 300 ms three times. Every cancel and pause is pushed to the
// sleeping waits of both. Leased turns off (a call per wait), then on.
//
// What is checked, and why each bound is exact:
//   - Every wait that went was given its turn by Redis (none by the fail
//     mode), no call failed, and none went before its turn (Redis's TIME
//     and time.Now read the same clock).
//   - Never over: the turns, replayed in time order through the bucket
//     (GCRA, 100/s, burst 5), are never early (schedtest.Conforms; 1 µs
//     for the script's rounding of each wait up to a µs).
//   - A push costs each process one call (op turns) for all its sleeping
//     waits, or none: counted by Redis, the calls beyond the waits' own,
//     the cancels and the pauses are at most one per push and process,
//     plus one per wait whose reserving call a push crossed (it asks
//     once for itself), which the bound counts at most a tenth of the
//     waits. A push that made every sleeping wait ask would break it many
//     times over (and keep Redis busy enough that, with the default
//     Timeout, calls time out and waits go by the fail mode).
//
// Timeout is 1 s so that a loaded machine does not fake an outage; each
// run takes about 4 s.
func TestCancelsAndPausesNeverOver(t *testing.T) {
	for _, leases := range []bool{false, true} {
		name := "leases off"
		if leases {
			name = "leases on"
		}
		t.Run(name, func(t *testing.T) { cancelsAndPauses(t, leases) })
	}
}

func cancelsAndPauses(t *testing.T, leases bool) {
	s, c1 := startRedis(t)
	c2 := newClient(t, s.Addr())
	const (
		limit, burst = 100, 5
		waits        = 360
		span         = 3 * time.Second
		procs        = 2
	)
	var (
		evmu   sync.Mutex
		events []throttle.Event
	)
	var qs []*Limiter
	for _, c := range []*redis.Client{c1, c2} {
		q := New(c, "cancels-pauses", throttle.Limit{Rate: limit, Burst: burst})
		q.Timeout = time.Second // a busy machine is no outage
		if !leases {
			q.MaxLease = 1
		}
		q.OnEvent = func(e throttle.Event) {
			evmu.Lock()
			events = append(events, e)
			evmu.Unlock()
		}
		defer q.Close()
		qs = append(qs, q)
	}
	type result struct {
		n      int
		cancel time.Duration
		turn   int64
		ret    time.Time
		err    error
	}
	r := rand.New(rand.NewPCG(22, 1))
	res := make([]result, waits)
	for i := range res {
		res[i].n = 1 + r.IntN(3)
		if i%2 == 1 {
			res[i].cancel = time.Duration(r.IntN(1000)) * time.Millisecond
		}
	}
	pauses := []time.Duration{600 * time.Millisecond, 1400 * time.Millisecond, 2200 * time.Millisecond}
	const paused = 3
	stats0 := commandStats(t, s)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range res {
		at := time.Duration(i) * span / waits
		if len(pauses) > 0 && at >= pauses[0] {
			pauses = pauses[1:]
			if err := qs[i%2].For("k").(*keyWaiter).Pause(context.Background(), 300*time.Millisecond); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(time.Until(start.Add(at)))
		w := qs[i/2%2].For("k").(*keyWaiter)
		wg.Go(func() {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if d := res[i].cancel; d > 0 {
				defer time.AfterFunc(d, cancel).Stop()
			}
			res[i].turn, res[i].err = w.waitN(ctx, res[i].n)
			res[i].ret = time.Now()
		})
	}
	wg.Wait()
	for _, q := range qs {
		q.Close() // the refunds, and leased turns given back
	}
	stats := commandStats(t, s)
	calls := stats["evalsha"] + stats["eval"] - stats0["evalsha"] - stats0["eval"]
	pushes := stats["publish"] - stats0["publish"]

	var adm []schedtest.Admission
	cancelled := 0
	for i, x := range res {
		switch {
		case x.err == nil && x.turn == 0:
			t.Errorf("wait %d went without a turn from Redis (the fail mode)", i)
		case x.err == nil:
			adm = append(adm, schedtest.Admission{At: time.Duration(x.turn) * time.Microsecond, N: x.n})
			if early := time.UnixMicro(x.turn).Sub(x.ret); early > 0 {
				t.Errorf("wait %d went %v before its turn", i, early)
			}
		case x.cancel > 0 && errors.Is(x.err, context.Canceled):
			cancelled++
		default:
			t.Errorf("wait %d (cancel after %v): %v", i, x.cancel, x.err)
		}
	}
	for _, e := range events {
		t.Errorf("event %v: %v", e.Kind, e.Err)
	}
	for _, v := range schedtest.Conforms(adm, limit, burst, time.Microsecond) {
		t.Error(v)
	}
	asks := calls - waits - int64(cancelled) - paused
	t.Logf("%d of %d waits went, most units in 1 s of turns %d (bucket %d); %d script calls, %.2f per wait that went; %d pushes, %d calls beyond the waits', cancels and pauses (%.2f a push and process)",
		len(adm), waits, schedtest.MostIn(adm, time.Second), burst+limit, calls, float64(calls)/float64(len(adm)),
		pushes, asks, float64(asks)/float64(procs*pushes))
	if most := procs*pushes + waits/10 + int64(len(adm)); asks > most {
		t.Errorf("%d calls beyond the waits', cancels and pauses, for %d pushes; want ≤ %d (one a push and process, a tenth of the waits, and an ask before each that went)", asks, pushes, most)
	}
}
