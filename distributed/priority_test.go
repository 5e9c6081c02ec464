package distributed

import (
	"context"

	"github.com/throttle-go/throttle/internal/schedule"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/throttle-go/throttle"
)

// TestPriorityFleet: four workers (own clients, as four processes would
// have) share a key of 50/s, burst 1, without leases, each saturating it
// with four background waits and four default ones; the workers take
// turns making 100 critical waits, one at a time, 37 ms apart. Every
// critical wait's turn, as Redis gave it, is within one interval (20 ms)
// of Redis's clock at the call: the class goes next, fleet-wide. The
// admissions' turns never exceed the bucket (1 + t/20 ms in any t), and
// the background waits get their share beside the default ones (1/5 of
// what those two classes got, within 2 units). The wall time a
// critical wait took is logged (it adds the round trips and the wake-up
// to the turn's wait).
func TestPriorityFleet(t *testing.T) {
	s, _ := startRedis(t)
	const workers, interval = 4, 20 * time.Millisecond
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		turns    []int64 // every admission's turn, µs of Redis's clock
		late     []time.Duration
		walls    []time.Duration
		def, bkg atomic.Int64
	)
	record := func(turn int64) {
		mu.Lock()
		turns = append(turns, turn)
		mu.Unlock()
	}
	var ws []*keyWaiter
	for range workers {
		c := newClient(t, s.Addr())
		q := New(c, "priority-fleet", throttle.Limit{Rate: 50, Burst: 1})
		q.Timeout = time.Second // a loaded machine must not turn this into an outage test
		// Leased turns are not asked for before they go: a wait that
		// passes them within a push's latency of their turn would go
		// beside one (see MaxLease).
		q.MaxLease = 1
		w := q.For("api").(*keyWaiter)
		for _, cl := range []struct {
			p throttle.Priority
			n *atomic.Int64
		}{{throttle.PriorityBackground, &bkg}, {throttle.PriorityDefault, &def}} {
			for range 4 {
				wg.Go(func() {
					ctx := throttle.WithPriority(ctx, cl.p)
					for {
						turn, err := w.waitN(ctx, 1)
						if ctx.Err() != nil {
							return
						}
						if err != nil {
							t.Errorf("%v wait: %v", cl.p, err)
							return
						}
						cl.n.Add(1)
						record(turn)
					}
				})
			}
		}
		ws = append(ws, w)
	}
	// The critical waits, one at a time, each from the next worker in
	// turn: none waits behind another.
	time.Sleep(time.Second) // the queues full
	for i := range 100 {
		w := ws[i%workers]
		cctx := throttle.WithPriority(ctx, throttle.PriorityCritical)
		start := time.Now()
		// The ticket, and its wait from Redis's clock at the call, as
		// waitDirectX takes it; then the sleep to its turn.
		r, err := w.takeX(cctx, 1, schedule.Critical, nil)
		if err != nil {
			t.Fatalf("critical wait: %v", err)
		}
		turn := r.rnow
		if r.wait > 0 {
			if turn, err = w.sleep(cctx, r.t, r.wait, r.recheck, r.rnow, r.gen, r.sub, true); err != nil {
				t.Fatalf("critical wait: %v", err)
			}
		}
		walls = append(walls, time.Since(start))
		record(turn)
		late = append(late, r.wait)
		time.Sleep(37 * time.Millisecond)
	}
	before := def.Load() + bkg.Load()
	d0, b0 := def.Load(), bkg.Load()
	time.Sleep(2 * time.Second) // default and background alone
	d1, b1 := def.Load()-d0, bkg.Load()-b0
	// The state every process reads: the classes' queued units.
	st, err := New(newClient(t, s.Addr()), "priority-fleet", throttle.Limit{Rate: 50, Burst: 1}).For("api").State(context.Background())
	if err != nil || st.QueuedBackground == 0 || st.Queued < st.QueuedBackground+st.QueuedCritical {
		t.Errorf("State while 16 background waits sleep: %+v, %v; want background units queued, within Queued", st, err)
	}
	stop()
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	for i, d := range late {
		if d > interval {
			t.Errorf("critical wait %d: its turn %v after Redis's clock at its call; want ≤ %v", i, d, interval)
		}
	}
	slices.Sort(turns)
	for i := range turns {
		// Never over: units i..j within (turns[j] − turns[i]) hold at
		// most 1 + that/interval.
		for j := i + 1; j < len(turns); j++ {
			span := time.Duration(turns[j]-turns[i]) * time.Microsecond
			if float64(j-i+1) > 1+float64(span)/float64(interval)+1e-9 {
				t.Fatalf("never over: %d units within %v; the bucket allows %v", j-i+1, span, 1+float64(span)/float64(interval))
			}
			if span > 2*time.Second {
				break
			}
		}
	}
	total := float64(d1 + b1)
	// ± 2: the counts are read at two instants, each of which may fall
	// between a unit's turn and its count.
	if want := total / 5; float64(b1) < want-2 || float64(b1) > want+2 {
		t.Errorf("beside the default class for 2 s, background got %d of %v units; want %.1f ± 2 (1/5)", b1, total, want)
	}
	if len(walls) == 0 {
		t.Fatal("no critical wait went")
	}
	slices.Sort(walls)
	t.Logf("critical: the longest walls %v; the last 2 s: default %d, background %d", walls[len(walls)-6:], d1, b1)
	t.Logf("critical: %d waits, wall p50 %v, p99 %v, max %v; turn after the call's clock ≤ %v; default %d, background %d units in all (%d before the last 2 s)",
		len(walls), walls[len(walls)/2], walls[len(walls)*99/100], walls[len(walls)-1], slices.Max(late), def.Load(), bkg.Load(), before)
}

// TestClassesStopLeases: a Limiter leases turns until one of its waits
// is of a class but the default's; from then on it leases none (a wait of
// another class may pass a leased turn, which goes unasked).
func TestClassesStopLeases(t *testing.T) {
	_, c := startRedis(t)
	q := New(c, "classes-leases", throttle.Limit{Rate: 1000, Burst: 10})
	q.Timeout = time.Second
	defer q.Close()
	if got := q.maxLease(); got != defaultMaxLease {
		t.Fatalf("maxLease %d before any class; want %d", got, defaultMaxLease)
	}
	if err := q.For("k").WaitN(throttle.WithPriority(context.Background(), throttle.PriorityBackground), 1); err != nil {
		t.Fatal(err)
	}
	if got := q.maxLease(); got != 1 {
		t.Errorf("maxLease %d after a background wait; want 1 (no leases)", got)
	}
}
