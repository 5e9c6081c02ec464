package distributed

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttle-go/throttle"
	"golang.org/x/time/rate"
)

// TestLimitsCancelRedis checks that a wait cancelled in the middle of the
// queue gives its units back on every limit: the wait behind it takes
// its turn. bytes 10/s burst 3: A takes 3 at once; B (300 ms) is
// cancelled at 50 ms; C, queued at 600 ms behind B, goes at 300 ms.
func TestLimitsCancelRedis(t *testing.T) {
	_, c := startRedis(t)
	q := New(c, "limits-cancel", throttle.Limit{Rate: 1000, Burst: 10}, throttle.Limit{Unit: "bytes", Rate: 10, Burst: 3})
	q.Timeout = time.Second
	defer q.Close()
	kw := q.For("k").(*keyWaiter)
	w := q.For("k")
	bytes3 := throttle.Cost{N: 1, Units: map[string]int{"bytes": 3}}
	start := time.Now()
	if err := w.Wait(t.Context(), bytes3); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var errB, errC error
	var atC time.Duration
	reached(t, c, kw.rkey, func() { wg.Go(func() { errB = w.Wait(ctx, bytes3) }) })
	wg.Go(func() { errC = w.Wait(t.Context(), bytes3); atC = time.Since(start) })
	awaitSleeping(t, q, 2)
	cancel()
	wg.Wait()
	if errB == nil || errC != nil || atC < 290*time.Millisecond || atC > 360*time.Millisecond {
		t.Errorf("B: %v; C: %v at %v; want context.Canceled; nil at about 300ms", errB, errC, atC)
	}
}

// TestLimitsMismatch checks that processes naming one quota with other
// Limits are refused with an error matching ErrConfigMismatch, not
// mixed, unless their Version is higher: then they replace them.
func TestLimitsMismatch(t *testing.T) {
	_, c := startRedis(t)
	newQ := func(tokens rate.Limit, version int) *Limiter {
		q := New(c, "limits-mismatch", throttle.Limit{Rate: 1000, Burst: 10}, throttle.Limit{Unit: "tokens", Rate: tokens, Burst: 100})
		q.Timeout, q.Version, q.MaxLease = time.Second, version, 1
		t.Cleanup(func() { q.Close() })
		return q
	}
	tok := throttle.Cost{N: 1, Units: map[string]int{"tokens": 1}}
	a, b, b1 := newQ(100, 0), newQ(50, 0), newQ(50, 1)
	// A queued wait keeps the key's state (a full bucket is forgotten).
	if err := a.For("").Wait(t.Context(), throttle.Cost{N: 1, Units: map[string]int{"tokens": 100}}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		q    *Limiter
		want error
	}{
		{"same limits", a, nil},
		{"other limits", b, ErrConfigMismatch},
		{"other limits, higher version", b1, nil},
		{"the first, now a lower version", a, ErrConfigMismatch},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		err := tt.q.For("").Wait(ctx, tok)
		cancel()
		if !errors.Is(err, tt.want) && !(tt.want == nil && errors.Is(err, throttle.ErrWouldExceedDeadline)) {
			t.Errorf("%s: Wait = %v; want %v", tt.name, err, tt.want)
		}
	}
}

// TestLimitsFleetWindow shares "100 requests per 2 s" (a fixed window,
// aligned to the Unix epoch on Redis's clock) among three processes'
// quotas, 600 non-blocking attempts (Try) over two windows: exactly
// 100 admitted in each, whichever process asked.
func TestLimitsFleetWindow(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("real clock: 4 s")
	}
	_, c := startRedis(t)
	const per = 2 * time.Second
	var qs []*Limiter
	for range 3 {
		q := New(c, "limits-fleet-window", throttle.Limit{Rate: 1e9, Burst: 1e6}, throttle.Limit{Unit: "requests", Count: 100, Per: per}) // the first limit far off
		q.Timeout = time.Second
		t.Cleanup(func() { q.Close() })
		qs = append(qs, q)
	}
	// From 50 ms into a window to 50 ms before the end of the next.
	time.Sleep(per - time.Duration(time.Now().UnixNano())%per + 50*time.Millisecond)
	start := time.Now()
	one := throttle.Cost{N: 1, Units: map[string]int{"requests": 1}}
	var mu sync.Mutex
	admitted := [2]int{}
	var wg sync.WaitGroup
	for i := range 6 { // two goroutines a process, 100 attempts each
		q := qs[i%3].For("api")
		wg.Go(func() {
			for j := range 100 {
				time.Sleep(time.Until(start.Add(time.Duration(j) * (2*per - 100*time.Millisecond) / 100)))
				w := int(time.Since(start) / (per - 50*time.Millisecond))
				ok, _, err := q.Try(t.Context(), one)
				if err != nil {
					t.Error(err)
					return
				}
				if ok && w < 2 {
					mu.Lock()
					admitted[w]++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if admitted != [2]int{100, 100} {
		t.Errorf("admitted %v in the two windows; want [100 100]", admitted)
	}
}

// TestLimitsFailLocal: while Redis is away, FailLocal holds every limit
// at this process's share, all or none: tokens 100/s burst 100 and a
// window of 10 requests per minute, 2 workers (shares: 50 tokens, 5
// requests). A cost of 50 tokens goes at once; the next 50 would wait
// a second (50 tokens at 50/s), so a wait with a 200 ms deadline is
// refused at once, and its refusal spends nothing: a try of 1 token
// still goes. The window's share is 5 requests: 4 more go (the refused
// wait took none), the next is refused. Before, FailLocal paced the quota's bucket only and every one
// of these went.
func TestLimitsFailLocal(t *testing.T) {
	c := newClient(t, "127.0.0.1:1") // nothing listens: every call fails
	q := New(c, "down-limits", throttle.Limit{Rate: 1000, Burst: 1000},
		throttle.Limit{Unit: "tokens", Rate: 100, Burst: 100}, throttle.Limit{Unit: "requests", Count: 10, Per: time.Minute})
	q.Workers = 2
	ctx := context.Background()
	w := q.For("k")
	tokens := func(n int) throttle.Cost {
		return throttle.Cost{N: 1, Units: map[string]int{"tokens": n, "requests": 1}}
	}
	if err := w.Wait(ctx, tokens(50)); err != nil {
		t.Fatalf("first 50 tokens = %v; want them at once (the share)", err)
	}
	dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := w.Wait(dctx, tokens(50))
	if !errors.Is(err, throttle.ErrWouldExceedDeadline) {
		t.Fatalf("next 50 tokens with a 200ms deadline = %v; want ErrWouldExceedDeadline (they come back at 50/s)", err)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("the refusal took %v; want it at once", d)
	}
	tr := q.For("k")
	for i := range 4 {
		ok, _, err := tr.Try(ctx, tokens(0))
		if err != nil || !ok {
			t.Fatalf("request %d of the window's share = %v, %v; want it to go", i+2, ok, err)
		}
	}
	ok, wait, err := tr.Try(ctx, tokens(0))
	if err != nil || ok || wait <= 0 || wait > time.Minute {
		t.Errorf("the 6th request in the minute = %v, wait %v, %v; want refused until the window's end, within a minute (the share is 5 of 10)", ok, wait, err)
	}
}

// TestLimitStatesRedis: a key's view of its further limits (State's
// Limits) is the throttle.Limiter's: the same waits on a key of each
// leave the same units in each kind of limit, read without changing the
// state (a second read gives the same windows).
func TestLimitStatesRedis(t *testing.T) {
	_, c := startRedis(t)
	ctx := context.Background()
	limits := []throttle.Limit{
		{Rate: 1000, Burst: 100},
		{Unit: "tokens", Rate: 1, Burst: 100},
		{Unit: "requests", Count: 10, Per: time.Hour},
		{Unit: "calls", Count: 5, Per: time.Hour, Kind: throttle.SlidingLog},
		{Unit: "batches", Count: 7, Per: time.Hour, Kind: throttle.FromFirstUse},
		{Unit: "rows", Count: 20, Per: time.Hour, Kind: throttle.Sliding},
	}
	q := New(c, "states", limits...)
	lim := &throttle.Limiter{Limits: limits}
	cost := throttle.Cost{N: 1, Units: map[string]int{"tokens": 30, "requests": 1, "calls": 2, "batches": 3, "rows": 4}}
	for range 2 {
		if err := q.For("k").Wait(ctx, cost); err != nil {
			t.Fatal(err)
		}
		if err := lim.For("k").Wait(ctx, cost); err != nil {
			t.Fatal(err)
		}
	}
	states := func(q throttle.Quota) []throttle.LimitState {
		t.Helper()
		st, err := q.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.Limits
	}
	got, want := states(q.For("k")), states(lim.For("k"))
	if len(got) != len(want) {
		t.Fatalf("Limiter's State.Limits = %v; want %d limits as throttle.Limiter's %v", got, len(want), want)
	}
	// Exact for the windows; the bucket refills at 1/s between the reads.
	exact := []float64{40, 8, 1, 1, 12}
	for i := range got {
		g, w := got[i], want[i]
		if g.Unit != w.Unit || g.Window != w.Window {
			t.Errorf("limit %d: %s window=%v; want %s window=%v", i, g.Unit, g.Window, w.Unit, w.Window)
		}
		if i == 0 {
			if g.Remaining < exact[0] || g.Remaining > exact[0]+0.1 || w.Remaining < exact[0] || w.Remaining > exact[0]+0.1 {
				t.Errorf("tokens left: Limiter %v, throttle.Limiter %v; want both 40 (+ at most 0.1 refilled)", g.Remaining, w.Remaining)
			}
			continue
		}
		if g.Remaining != exact[i] || w.Remaining != exact[i] {
			t.Errorf("%s left: Limiter %v, throttle.Limiter %v; want %v", g.Unit, g.Remaining, w.Remaining, exact[i])
		}
	}
	again := states(q.For("k"))
	for i := 1; i < len(again); i++ {
		if again[i].Remaining != got[i].Remaining {
			t.Errorf("%s left on a second read: %v; want %v (a read changes nothing)", again[i].Unit, again[i].Remaining, got[i].Remaining)
		}
	}
	if none := states(New(c, "plain", throttle.Limit{Rate: 10, Burst: 10}).For("k")); none != nil {
		t.Errorf("State.Limits of a key without further limits = %v; want nil", none)
	}
}

// TestReserveCostRedis: a key's reservation of a cost, as a throttle.Limiter's
// (TestReserveCost): tokens 100/s burst 100, 60 a reservation. The
// second's turn is about 200 ms away; cancelled, its tokens serve a try
// of 40 at once, every limit's units back.
func TestReserveCostRedis(t *testing.T) {
	_, c := startRedis(t)
	ctx := context.Background()
	q := New(c, "reserve-cost", throttle.Limit{Rate: 100, Burst: 10}, throttle.Limit{Unit: "tokens", Rate: 100, Burst: 100})
	k := q.For("k")
	cost := throttle.Cost{N: 1, Units: map[string]int{"tokens": 60}}
	r1, err := k.Reserve(ctx, cost)
	if err != nil || r1.Delay() != 0 {
		t.Fatalf("first reservation = %v, delay %v; want at once", err, r1.Delay())
	}
	r2, err := k.Reserve(ctx, cost)
	// 20 tokens at 100/s, less the time since the first (the bucket
	// refills meanwhile): within 10 ms of 200 ms on loopback.
	if err != nil || r2.Delay() < 190*time.Millisecond || r2.Delay() > 200*time.Millisecond {
		t.Fatalf("second reservation = %v, delay %v; want about 200ms", err, r2.Delay())
	}
	r2.Cancel()
	ok, _, err := k.Try(ctx, throttle.Cost{N: 1, Units: map[string]int{"tokens": 40}})
	if !ok || err != nil {
		t.Fatalf("try of the 40 tokens left after the cancel = %v, %v; want it to go", ok, err)
	}
	if _, err := k.Reserve(ctx, throttle.Cost{N: 1, Units: map[string]int{"nope": 1}}); !errors.Is(err, throttle.ErrInvalidLimit) {
		t.Errorf("a reservation in an unknown unit = %v; want ErrInvalidLimit", err)
	}
}

// twoProcesses returns two Limiters named name on c, as two processes
// would make them: the first limit far off, a further limit of w in
// requests.
func twoProcesses(t *testing.T, c *redis.Client, name string, w throttle.Limit) [2]*Limiter {
	var qs [2]*Limiter
	for i := range qs {
		w.Unit = "requests"
		q := New(c, name, throttle.Limit{Rate: 1e9, Burst: 1e6}, w)
		q.Timeout = time.Second
		t.Cleanup(func() { q.Close() })
		qs[i] = q
	}
	return qs
}
