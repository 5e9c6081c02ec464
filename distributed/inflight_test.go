package distributed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/internal/redistest"
	"golang.org/x/time/rate"
)

// capLimiter returns a Limiter with an in-flight cap of n on c, closed at
// cleanup.
func capLimiter(t *testing.T, c redis.UniversalClient, name string, n int) *Limiter {
	t.Helper()
	q := New(c, name, throttle.Limit{Rate: rate.Inf, Burst: 1000})
	q.InFlight = n
	q.FailMode = FailClosed // a store error must show
	q.Timeout = 2 * time.Second
	t.Cleanup(func() { q.Close() })
	return q
}

func mustAcquireQ(t *testing.T, q *Limiter, key string, n int) func() {
	t.Helper()
	release, err := q.For(key).Acquire(context.Background(), n)
	if err != nil {
		t.Fatalf("Acquire(%d) = %v", n, err)
	}
	return release
}

// heldUnits returns the units held under key's cap in Redis now.
func heldUnits(t *testing.T, c redis.UniversalClient, q *Limiter, key string) int {
	t.Helper()
	members, err := c.ZRange(context.Background(), inflightKeys(redisKey(q.Prefix, q.name, key))[0], 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range members {
		var u int
		for _, ch := range m {
			if ch == ':' {
				break
			}
			u = 10*u + int(ch-'0')
		}
		n += u
	}
	return n
}

// TestLimiterInFlightFIFO: two processes (two Limiters, two clients) share a
// cap of 2. Waiting acquisitions are granted in arrival order across
// them, a large head is not overtaken, and a release reaches a waiting
// process at once (pushed, not polled: well within the TTL).
func TestLimiterInFlightFIFO(t *testing.T) {
	srv, c1 := startRedis(t)
	c2 := newClient(t, srv.Addr())
	q1, q2 := capLimiter(t, c1, "fifo", 2), capLimiter(t, c2, "fifo", 2)
	r1 := mustAcquireQ(t, q1, "k", 1)
	r2 := mustAcquireQ(t, q2, "k", 1)

	type grant struct {
		name string
		at   time.Time
	}
	grants := make(chan grant, 4)
	rels := make(chan func(), 4)
	var wg sync.WaitGroup
	for i, w := range []struct {
		name string
		q    *Limiter
		n    int
	}{{"A2", q1, 2}, {"B1", q2, 1}, {"C2", q1, 2}} {
		wg.Go(func() {
			release, err := w.q.For("k").Acquire(context.Background(), w.n)
			if err != nil {
				t.Errorf("%s: Acquire = %v", w.name, err)
				return
			}
			grants <- grant{w.name, time.Now()}
			rels <- release
		})
		// In this order into Redis's queue: wait until it is there.
		deadline := time.Now().Add(5 * time.Second)
		for {
			n, _ := c1.ZCard(context.Background(), inflightKeys(redisKey("", "fifo", "k"))[1]).Result()
			if int(n) == i+1 || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	r1() // 1 free: A2 needs 2 and blocks B1 and C1
	time.Sleep(200 * time.Millisecond)
	select {
	case g := <-grants:
		t.Fatalf("%s granted with 1 unit free and A2 (2) at the head", g.name)
	default:
	}
	released := time.Now()
	r2()
	g := <-grants
	if g.name != "A2" {
		t.Fatalf("first granted %s; want A2", g.name)
	}
	t.Logf("a release reached the waiting process after %v", g.at.Sub(released))
	if d := g.at.Sub(released); d > time.Second {
		t.Errorf("A2 granted %v after the release; want at once (pushed), not at a lease's expiry (TTL %v)", d, DefaultLeaseTTL)
	}
	(<-rels)() // A2's 2: B1, then C2 (2) waits for B1's
	if g := <-grants; g.name != "B1" {
		t.Fatalf("then granted %s; want B1", g.name)
	}
	time.Sleep(200 * time.Millisecond)
	select {
	case g := <-grants:
		t.Fatalf("%s granted while B1 holds 1 of 2", g.name)
	default:
	}
	(<-rels)()
	if g := <-grants; g.name != "C2" {
		t.Fatalf("then granted %s; want C2", g.name)
	}
	wg.Wait()
	(<-rels)()
	q1.refunds.Wait() // releases are sent in the background
	q2.refunds.Wait()
	if h := heldUnits(t, c1, q1, "k"); h != 0 {
		t.Errorf("held %d in Redis after every release; want 0", h)
	}
}

// TestLimiterInFlightCancel: an acquisition whose ctx ends returns ctx's
// error and holds nothing; a release called twice frees its units once.
func TestLimiterInFlightCancel(t *testing.T) {
	_, c := startRedis(t)
	q := capLimiter(t, c, "cancel", 2)
	a := q.For("k")
	r1 := mustAcquireQ(t, q, "k", 1)
	r2 := mustAcquireQ(t, q, "k", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := a.Acquire(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Acquire past its deadline = %v; want DeadlineExceeded", err)
	}
	if d := time.Since(start); d < 300*time.Millisecond || d > time.Second {
		t.Errorf("Acquire with 300ms returned after %v", d)
	}
	r1()
	r1()
	r1()
	r3 := mustAcquireQ(t, q, "k", 1) // the unit r1 freed
	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := a.Acquire(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a third unit under a cap of 2 after a release called three times = %v; want DeadlineExceeded", err)
	}
	r2()
	r3()
	q.Close()
	if h := heldUnits(t, c, q, "k"); h != 0 {
		t.Errorf("held %d in Redis; want 0", h)
	}
	if _, err := a.Acquire(context.Background(), 3); !errors.Is(err, throttle.ErrCostExceedsBurst) {
		t.Errorf("Acquire(3) under a cap of 2 = %v; want ErrCostExceedsBurst", err)
	}
}

// TestLimiterInFlightRenewal: a lease held for 4 TTLs is renewed by its
// holder, and holds its unit all along; once released, the unit goes to
// the process waiting for it.
func TestLimiterInFlightRenewal(t *testing.T) {
	t.Parallel()
	srv, c1 := startRedis(t)
	q1 := capLimiter(t, c1, "renew", 1)
	q2 := capLimiter(t, newClient(t, srv.Addr()), "renew", 1)
	q1.LeaseTTL, q2.LeaseTTL = 300*time.Millisecond, 300*time.Millisecond
	release := mustAcquireQ(t, q1, "k", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 1200*time.Millisecond)
	defer cancel()
	if _, err := q2.For("k").Acquire(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Acquire while another process holds the only unit for 4 TTLs = %v; want DeadlineExceeded (the lease renewed)", err)
	}
	release()
	r := mustAcquireQ(t, q2, "k", 1)
	r()
}

// TestLimiterInFlightMismatch: a process with another cap under the same
// Version is refused; one with a higher Version replaces it.
func TestLimiterInFlightMismatch(t *testing.T) {
	_, c := startRedis(t)
	q1 := capLimiter(t, c, "mismatch", 2)
	r := mustAcquireQ(t, q1, "k", 1)
	defer r()
	q2 := capLimiter(t, c, "mismatch", 3)
	if _, err := q2.For("k").Acquire(context.Background(), 1); !errors.Is(err, ErrConfigMismatch) {
		t.Errorf("Acquire with cap 3 where cap 2 holds = %v; want ErrConfigMismatch", err)
	}
	q3 := capLimiter(t, c, "mismatch", 3)
	q3.Version = 1
	r3 := mustAcquireQ(t, q3, "k", 1)
	r3()
}

// TestLimiterInFlightCluster: on a real 3-master Cluster every key the
// in-flight script touches is in the slot of the key's schedule (a
// cross-slot script call would fail), for keys that land on each master.
func TestLimiterInFlightCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t)
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ContextTimeoutEnabled: true})
	defer client.Close()
	q := capLimiter(t, client, "cluster", 1)
	for i := range 12 {
		key := fmt.Sprintf("tenant-%d", i)
		rkey := redisKey("", "cluster", key)
		want, err := client.ClusterKeySlot(context.Background(), rkey).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range inflightKeys(rkey) {
			if got, _ := client.ClusterKeySlot(context.Background(), k).Result(); got != want {
				t.Errorf("%s in slot %d; want %d (the schedule's)", k, got, want)
			}
		}
		release := mustAcquireQ(t, q, key, 1)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		if _, err := q.For(key).Acquire(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: a second unit under a cap of 1 = %v; want DeadlineExceeded", key, err)
		}
		cancel()
		release()
		mustAcquireQ(t, q, key, 1)()
	}
}

// TestLimiterInFlightTransport: through a Transport, a request holds its
// lease until its body is closed; the one behind it is sent then, and
// its wait is an EventInFlight on the Transport's OnEvent.
func TestLimiterInFlightTransport(t *testing.T) {
	_, c := startRedis(t)
	q := capLimiter(t, c, "transport", 1)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer hs.Close()
	var (
		mu     sync.Mutex
		events []throttle.Event
	)
	hc := &http.Client{Transport: &throttle.Transport{Base: hs.Client().Transport, Waiter: q,
		OnEvent: func(e throttle.Event) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		}}}
	first, err := hc.Get(hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	sent := make(chan time.Time, 1)
	started := make(chan time.Time, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		started <- time.Now()
		resp, err := hc.Get(hs.URL)
		if err != nil {
			t.Errorf("second Get = %v", err)
			sent <- time.Time{}
			return
		}
		sent <- time.Now()
		resp.Body.Close()
	})
	// The first holds the lease 300 ms from the second's start: its
	// wait begins a little later (the Transport's work before it).
	goStart := <-started
	time.Sleep(time.Until(goStart.Add(300 * time.Millisecond)))
	select {
	case <-sent:
		t.Fatal("the second request went while the first held the only lease")
	default:
	}
	closed := time.Now()
	first.Body.Close()
	at := <-sent
	if d := at.Sub(closed); at.IsZero() || d > time.Second {
		t.Errorf("second request sent %v after the first body closed; want at once", d)
	}
	mu.Lock()
	defer mu.Unlock()
	// The wait lies within (goStart, at]: its delay is at most at −
	// goStart, and at least the 300 ms held less the Transport's work
	// before the wait began (well under 50 ms: a key, a cost, no I/O).
	i := slices.IndexFunc(events, func(e throttle.Event) bool { return e.Kind == throttle.EventInFlight })
	if i < 0 || events[i].Delay < 250*time.Millisecond || events[i].Delay > at.Sub(goStart) || events[i].Request == nil {
		t.Errorf("events %+v; want an EventInFlight of 250ms to %v (held 300ms from the second request's start), with its request", events, at.Sub(goStart))
	}
}
