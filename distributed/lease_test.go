package distributed

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/throttle-go/throttle"
	"golang.org/x/time/rate"
)

// held returns the tickets q holds for rkey.
func held(q *Limiter, rkey string) int {
	q.leases.mu.Lock()
	b := q.leases.m[rkey]
	q.leases.mu.Unlock()
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.tickets)
}

// hammer runs goroutines waiting on w until ctx ends, and returns the
// turns (Redis's clock, µs) of the waits that went.
func hammer(ctx context.Context, t *testing.T, w *keyWaiter, goroutines int) func() []int64 {
	var (
		mu    sync.Mutex
		turns []int64
		wg    sync.WaitGroup
	)
	for range goroutines {
		wg.Go(func() {
			for ctx.Err() == nil {
				turn, err := w.waitN(ctx, 1)
				if err != nil {
					if ctx.Err() == nil && !errors.Is(err, throttle.ErrWouldExceedDeadline) {
						t.Errorf("WaitN = %v", err)
					}
					return
				}
				mu.Lock()
				turns = append(turns, turn)
				mu.Unlock()
			}
		})
	}
	return func() []int64 {
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(turns)
	}
}

// checkNeverOver checks the bucket's bound on turns of Redis's clock: any
// run of units from the i-th to the j-th turn (sorted) fits burst +
// rate·(tⱼ − tᵢ). It is exact up to the rounding of each wait to whole
// µs, which a turn carries (1µs each end).
func checkNeverOver(t *testing.T, turns []int64, limit float64, burst int) {
	t.Helper()
	slices.Sort(turns)
	worst, at := 0.0, 0
	for i := range turns {
		for j := i; j < len(turns); j++ {
			allowed := float64(burst) + limit*float64(turns[j]-turns[i]+2)/1e6
			if over := float64(j-i+1) - allowed; over > worst {
				worst, at = over, i
			}
			if float64(turns[j]-turns[i])*limit/1e6 > float64(len(turns)) {
				break
			}
		}
	}
	if worst > 1e-9 {
		t.Errorf("%.3f units over burst + rate·t from turn %d (µs %d); want none", worst, at, turns[at])
	}
}

// TestLeaseExact: four Limiters on clients of their own (four processes as
// far as Redis can tell) with 8 goroutines each share a key at 400/s,
// burst 20, for 1.5 s: leases happen (in the run's steady middle second,
// fewer calls than waits), and the turns of every wait that went, leased
// or not, keep the bucket's bound on Redis's clock exactly.
func TestLeaseExact(t *testing.T) {
	t.Parallel()
	s, _ := startRedis(t)
	const limit, burst, procs, goroutines = 400, 20, 4, 8
	const run = 1500 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		done []func() []int64
		qs   []*Limiter
	)
	for range procs {
		q := New(newClient(t, s.Addr()), "lease-exact", throttle.Limit{Rate: limit, Burst: burst})
		q.Timeout = time.Second // a busy machine is no outage
		q.FailMode = FailClosed // a store error must show
		qs = append(qs, q)
		done = append(done, hammer(ctx, t, q.For("k").(*keyWaiter), goroutines))
	}
	time.Sleep(run / 3)
	if _, err := s.Do("CONFIG", "RESETSTAT"); err != nil {
		t.Fatal(err)
	}
	from := time.Now()
	time.Sleep(run / 3)
	calls := commandStats(t, s)["evalsha"]
	measured := time.Since(from)
	time.Sleep(run / 3)
	cancel()
	var turns []int64
	for _, f := range done {
		turns = append(turns, f()...)
	}
	for _, q := range qs {
		q.Close()
	}
	// The waits in the measured span: the rate's, as the queue never
	// drains (32 goroutines ahead of 400/s).
	waits := limit * measured.Seconds()
	t.Logf("%d waits went; in the middle %v: %d EVALSHA for ~%.0f waits (%.3f per wait)", len(turns), measured.Round(time.Millisecond), calls, waits, float64(calls)/waits)
	checkNeverOver(t, turns, limit, burst)
	// At 100 waits a second a process, a lease is the wait queued and
	// about 5 expected (50 ms of them): some 0.2 calls a wait; half
	// leaves room for a loaded machine, and is far below one.
	if float64(calls) >= 0.5*waits {
		t.Errorf("%d EVALSHA for ~%.0f waits; want leases (fewer than half as many calls)", calls, waits)
	}
}

// TestLeasePause: a pause written by another process while a process
// holds leased tickets (and its waits sleep on others) moves them: no
// wait goes with a turn inside the pause, on Redis's clock, exactly.
func TestLeasePause(t *testing.T) {
	s, c := startRedis(t)
	const limit, burst = 100, 1
	const pause = 400 * time.Millisecond
	q := New(newClient(t, s.Addr()), "lease-pause", throttle.Limit{Rate: limit, Burst: burst})
	q.Timeout = time.Second
	defer q.Close()
	w := q.For("k").(*keyWaiter)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := hammer(ctx, t, w, 8)
	// Until the process holds tickets no wait has taken (at most 2 s).
	for i := 0; held(q, w.rkey) == 0; i++ {
		if i == 2000 {
			t.Fatal("no tickets leased in 2 s")
		}
		time.Sleep(time.Millisecond)
	}
	other := New(newClient(t, s.Addr()), "lease-pause", throttle.Limit{Rate: limit, Burst: burst})
	defer other.Close()
	before := redisNow(t, c)
	if err := other.For("").Pause(context.Background(), pause); err != nil {
		t.Fatal(err)
	}
	_, end, _ := hashState(t, c, w.rkey)
	time.Sleep(pause + 200*time.Millisecond)
	cancel()
	turns := done()
	inside, after := 0, 0
	for _, turn := range turns {
		switch {
		case float64(turn) > before && float64(turn) < end:
			inside++
		case float64(turn) >= end:
			after++
		}
	}
	t.Logf("%d waits; %d after the pause, %d inside it", len(turns), after, inside)
	if inside > 0 {
		t.Errorf("%d waits went with turns inside the pause; want none", inside)
	}
	if after == 0 {
		t.Errorf("no wait went after the pause; want the queue to go on")
	}
}

// leaseAhead makes q's box of w lease ahead as at 1000 waits a second
// (as if they had come within the last second), at a quota whose turns
// are 100ms apart: the tickets reach seconds ahead. It returns how many
// the box holds.
func leaseAheadOf(t *testing.T, q *Limiter, w *keyWaiter) int {
	t.Helper()
	b := q.leases.box(w)
	b.mu.Lock()
	now := time.Now()
	for range 1000 {
		b.arrive(now)
	}
	b.calling = true
	b.mu.Unlock()
	b.serve(context.Background(), true)
	n := held(q, w.rkey)
	if n < 10 {
		t.Fatalf("%d tickets leased ahead at 1000/s expected; want many", n)
	}
	return n
}

// TestLeaseLowRate: waits that overlap at a low rate (two goroutines at
// 10/s: fewer than one wait expected within leaseHorizon) lease one
// ticket each: no more EVALSHA than without leases (a ticket a wait, and
// an ask before going for one that sleeps on its own ticket).
func TestLeaseLowRate(t *testing.T) {
	t.Parallel()
	s, c := startRedis(t)
	q := New(c, "lease-low", throttle.Limit{Rate: 10, Burst: 1})
	q.Timeout = time.Second
	defer q.Close()
	w := q.For("k").(*keyWaiter)
	ctx := context.Background()
	for i := 0; i < 3 || !subscribed(q); i++ { // as in TestOneCommandPerWait
		if i == 50 {
			t.Fatal("the subscription to pushed moves did not come up in 50 waits")
		}
		if err := w.WaitN(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Do("CONFIG", "RESETSTAT"); err != nil {
		t.Fatal(err)
	}
	const per = 5
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for range per {
				if err := w.WaitN(ctx, 1); err != nil {
					t.Errorf("WaitN = %v", err)
				}
			}
		})
	}
	wg.Wait()
	calls := commandStats(t, s)["evalsha"]
	t.Logf("%d waits: %d EVALSHA", 2*per, calls)
	if calls < 2*per || calls > 2*2*per {
		t.Errorf("%d EVALSHA for %d waits; want no more than without leases: a ticket each, and an ask before going for one that sleeps on its own", calls, 2*per)
	}
}

// TestLeaseDeadline: a wait whose deadline comes before the next leased
// turn fails at once with the deadline error, and leaves the ticket for
// the next wait, which takes it.
func TestLeaseDeadline(t *testing.T) {
	_, c := startRedis(t)
	// 200ms per unit: the next leased turn is 150ms past the deadline
	// of a refused wait (50ms), so that the test's own steps may take
	// that long on the real clock.
	q := New(c, "lease-deadline", throttle.Limit{Rate: rate.Limit(5), Burst: 1})
	q.Timeout = time.Second
	defer q.Close()
	w := q.For("k").(*keyWaiter)
	leaseAheadOf(t, q, w)
	// No idle timer: had it fired (leaseIdle after the lease) before the
	// first wait, as on a machine busy for that long, it would have asked
	// the held turns again, and the first wait would find them fresh.
	b := q.leases.box(w)
	b.mu.Lock()
	b.idle.Stop()
	b.setIdle(time.Hour)
	b.mu.Unlock()
	// The first ticket went at the lease: take it, or let it pass
	// (leaseKeep). A refused wait drops it, to be given back, before it
	// looks at the next (200ms after the first).
	time.Sleep(leaseKeep + leaseLate)
	refused := func() (time.Duration, error) {
		dctx, dcancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer dcancel()
		start := time.Now()
		err := w.WaitN(dctx, 1)
		return time.Since(start), err
	}
	if _, err := refused(); !errors.Is(err, throttle.ErrWouldExceedDeadline) {
		t.Fatalf("WaitN with 50ms left, the next leased turn ~160ms ahead = %v; want the deadline error", err)
	}
	n := held(q, w.rkey)
	took, err := refused()
	var de *throttle.DeadlineError
	if !errors.As(err, &de) || !errors.Is(err, throttle.ErrWouldExceedDeadline) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitN with 50ms left, the next leased turn ~160ms ahead = %v; want a *throttle.DeadlineError", err)
	}
	// At once: a lock and a comparison, no call, no sleep; 50ms is the
	// deadline itself, which a wait that slept into it would reach.
	if took >= 50*time.Millisecond {
		t.Errorf("WaitN with 50ms left took %v; want at once", took)
	}
	if got := held(q, w.rkey); got != n {
		t.Errorf("%d tickets held after the refused wait; want %d (the ticket stays)", got, n)
	}
	start := time.Now()
	if err := w.WaitN(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if got := held(q, w.rkey); got != n-1 {
		t.Errorf("%d tickets held after the next wait; want %d (it took the one left)", got, n-1)
	}
	t.Logf("refused in %v; the next wait took the ticket and slept %v", took, time.Since(start).Round(time.Millisecond))
	// What the box counted: one lease, made ahead, of the n+1 tickets
	// held at first; the first ticket (due at the lease) passed unused;
	// three waits through the box. The first waited for a call it
	// started (the held turns asked again, not a lease) if the tickets
	// were leased before the box listened for pushes; where the
	// subscription was up first (its answer and the lease race on the
	// real clock; a loaded machine reorders them), it waited for none.
	st := leaseStatsOf(q)
	stalled := st.stalled
	if (stalled == 1) != (st.stallTime > 0) || stalled > 1 {
		t.Errorf("lease stats: %d waits stalled for %v; want 1 with its time > 0, or none with 0", stalled, st.stallTime)
	}
	st.stallTime = 0
	want := leaseStats{waits: 3, stalled: stalled, cold: stalled, leases: 1, ahead: 1, leased: n + 1, expired: 1}
	if st != want {
		t.Errorf("lease stats %+v; want %+v", st, want)
	}
}

// TestLeaseTurnsAsWaits: a lease of k tickets takes the turns k waits in
// a row take, rule for rule: one key's state (a pause of a second ahead,
// so that no turn depends on when a call ran) is copied to a second key;
// k calls of op wait on the one and one op lease of k on the other give
// the same turns, to the µs a wait is rounded to. With the bucket alone
// (the closed form past the first ticket) and with a window running low
// (the whole model for each ticket).
func TestLeaseTurnsAsWaits(t *testing.T) {
	for _, tt := range []struct {
		name   string
		window bool
	}{{"bucket", false}, {"window", true}} {
		t.Run(tt.name, func(t *testing.T) {
			_, c := startRedis(t)
			q := New(c, "lease-as-waits", throttle.Limit{Rate: 50, Burst: 5})
			q.Timeout = time.Second
			defer q.Close()
			ctx := context.Background()
			const k = 30
			wa, wb := q.For("waits").(*keyWaiter), q.For("lease").(*keyWaiter)
			if tt.window {
				// 8 left of 100 until a reset 3 s away: spread until it.
				if _, err := wa.Observe(ctx, throttle.Feedback{Spent: 1, Window: &throttle.ServerWindow{Remaining: 8, Reset: 3 * time.Second, Size: 100, Length: 10 * time.Second}}); err != nil {
					t.Fatal(err)
				}
			}
			if err := wa.Pause(ctx, time.Second); err != nil {
				t.Fatal(err)
			}
			state, err := c.HGetAll(ctx, wa.rkey).Result()
			if err != nil || len(state) == 0 {
				t.Fatalf("HGETALL = %v, %v", state, err)
			}
			if err := c.HSet(ctx, wb.rkey, state).Err(); err != nil {
				t.Fatal(err)
			}
			if err := c.Expire(ctx, wb.rkey, time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			var waits, lease []int64
			for range k {
				r, err := wa.run(ctx, "wait", 1, queueFirst, "", "", "", "")
				if err != nil || len(r) != 6 || r[0] != 1 {
					t.Fatalf("wait = %v, %v", r, err)
				}
				waits = append(waits, r[5]+r[1])
			}
			r, err := wb.run(ctx, "lease", leaseArgs{K: k, Need: k, Maxwait: "", Rate: "0", Late: leaseLate.Microseconds(), KnownID: "", KnownFloor: "", KnownHold: "", BackID: ""}.append(nil)...)
			if err != nil || len(r) != 5+k || r[0] != k {
				t.Fatalf("lease = %v, %v", r, err)
			}
			for j := range k {
				lease = append(lease, r[4]+r[5+j])
			}
			_, hold, _ := hashState(t, c, wa.rkey)
			t.Logf("turns from the pause's end, µs: waits %v, lease %v", relTo(waits, hold), relTo(lease, hold))
			for j := range k {
				if d := waits[j] - lease[j]; d < -2 || d > 2 {
					t.Errorf("ticket %d: the wait's turn %+dµs from the lease's; want the same (±2µs rounding)", j, d)
				}
			}
		})
	}
}

func relTo(turns []int64, from float64) []int64 {
	out := make([]int64, len(turns))
	for i, t := range turns {
		out[i] = t - int64(from)
	}
	return out
}
