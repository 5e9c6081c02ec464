package distributed

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/throttle-go/throttle"
)

// TestQueueFullFleet: MaxQueued bounds the key's queue in Redis, which
// both processes' waits join: with the burst spent and 3 units queued
// (2 reserved by one process, 1 by the other), a wait and a reservation
// of either fail at once with ErrQueueFull, each an EventQueueFull to
// OnEvent and to the call's WithEvents, and nothing changes: 3 queued,
// the queued turns as they were.
func TestQueueFullFleet(t *testing.T) {
	_, c := startRedis(t)
	var mu sync.Mutex
	var events []throttle.Event
	onEvent := func(e throttle.Event) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}
	limit := throttle.Limit{Rate: 10, Burst: 1}
	a, b := New(c, "queues", limit), New(c, "queues", limit)
	for _, q := range []*Limiter{a, b} {
		q.MaxQueued, q.OnEvent = 3, onEvent
		defer q.Close()
	}
	ctx := context.Background()
	if err := a.For("k").Wait(ctx); err != nil {
		t.Fatal(err)
	}
	var rs []throttle.Reservation
	for _, q := range []*Limiter{a, a, b} {
		r, err := q.For("k").Reserve(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Cancel()
		rs = append(rs, r)
	}
	before, err := a.For("k").State(ctx)
	if err != nil || before.Queued != 3 {
		t.Fatalf("before: %+v, %v; want 3 queued", before, err)
	}
	var ctxEvents []throttle.Event
	ectx := throttle.WithEvents(ctx, func(e throttle.Event) { ctxEvents = append(ctxEvents, e) })
	start := time.Now()
	err = b.For("k").Wait(ectx)
	took := time.Since(start)
	if !errors.Is(err, throttle.ErrQueueFull) || !strings.Contains(err.Error(), `"k"`) || !strings.Contains(err.Error(), "MaxQueued 3") {
		t.Fatalf("wait: %v; want ErrQueueFull naming the key and the bound", err)
	}
	if _, err := a.For("k").Reserve(ctx); !errors.Is(err, throttle.ErrQueueFull) {
		t.Errorf("reservation: %v; want ErrQueueFull", err)
	}
	after, err := a.For("k").State(ctx)
	if err != nil || after.Queued != 3 {
		t.Errorf("after the refusals: %+v, %v; want 3 queued", after, err)
	}
	// The queued turns did not move: the last one's, as before (less the
	// time between the two reads).
	if d := rs[2].Delay(); d > 300*time.Millisecond || d < 200*time.Millisecond-time.Since(start)-25*time.Millisecond {
		t.Errorf("the last queued turn in %v; want about 300ms less %v", d, time.Since(start))
	}
	// One at a time, as a steady overload sends them: a script call each.
	lat := make([]time.Duration, 200)
	for i := range lat {
		start := time.Now()
		if err := b.For("k").Wait(ctx); !errors.Is(err, throttle.ErrQueueFull) {
			t.Fatalf("refusal %d: %v", i, err)
		}
		lat[i] = time.Since(start)
	}
	slices.Sort(lat)
	t.Logf("a refusal through Redis took %v; 200 more one at a time: p50 %v, p99 %v", took, lat[100], lat[198])
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 202 || events[0].Kind != throttle.EventQueueFull || events[0].Key != "k" || events[0].Units != 1 || !errors.Is(events[0].Err, throttle.ErrQueueFull) {
		t.Errorf("OnEvent got %+v; want 202 EventQueueFull of 1 unit of k", events[:min(len(events), 3)])
	}
	if len(ctxEvents) != 1 || ctxEvents[0].Kind != throttle.EventQueueFull {
		t.Errorf("WithEvents got %+v; want one EventQueueFull", ctxEvents)
	}
}

// TestQueueSpikeFleet: a key of 10/s (burst 10) takes a 10× spike at
// once, 100 goroutines × 10 waits each in a goroutine of its own: with
// MaxQueued 20 the waits asleep (and their goroutines) stay at 20, the
// rest refused in about a round trip each; every goroutine returns once
// the waits end. Real clock, real redis-server.
func TestQueueSpikeFleet(t *testing.T) {
	_, c := startRedis(t)
	// A unit every 10 s: over the spike (10 s at most, below) the key
	// frees one unit at most beyond its burst, however slow the machine.
	q := New(c, "spike", throttle.Limit{Rate: 0.1, Burst: 10})
	q.MaxQueued = 20
	// 1000 calls at once queue for the client's connections: a call's
	// bound is raised so that none falls back (a FailLocal wait sleeps
	// in the fallback's Limiter, which this test does not count).
	q.Timeout = 5 * time.Second
	var fallbacks atomic.Int64
	q.OnEvent = func(e throttle.Event) {
		if e.Kind != throttle.EventQueueFull {
			fallbacks.Add(1)
		}
	}
	defer q.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := q.For("k").State(ctx); err != nil { // the script loaded
		t.Fatal(err)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	baseG, baseHeap := runtime.NumGoroutine(), ms.HeapInuse
	const waits = 1000
	var refused, done atomic.Int64
	var lmu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	for range waits {
		wg.Go(func() {
			defer done.Add(1)
			start := time.Now()
			err := q.For("k").Wait(ctx)
			if errors.Is(err, throttle.ErrQueueFull) {
				d := time.Since(start)
				refused.Add(1)
				lmu.Lock()
				lat = append(lat, d)
				lmu.Unlock()
			}
		})
	}
	// During: every wait has returned refused, gone, or sleeps on its turn.
	for deadline := time.Now().Add(10 * time.Second); done.Load()+int64(sleeping(q)) < waits; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d waits returned, %d asleep 10 s on (%d events of the store's failures)", done.Load(), sleeping(q), fallbacks.Load())
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	duringG, asleep := runtime.NumGoroutine()-baseG, sleeping(q)
	duringHeap := int64(ms.HeapInuse) - int64(baseHeap)
	cancel()
	wg.Wait()
	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > baseG; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("%d goroutines 5 s after the waits ended; %d before", runtime.NumGoroutine(), baseG)
			break
		}
	}
	afterG := runtime.NumGoroutine() - baseG
	slices.Sort(lat)
	pct := func(p float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(p*float64(len(lat))))]
	}
	t.Logf("MaxQueued 20, %d waits at once: %d refused, %d asleep; goroutines +%d during, +%d after; heap in use %+d KiB during; refusal latency p50 %v, p99 %v, max %v",
		waits, refused.Load(), asleep, duringG, afterG, duringHeap>>10, pct(0.5), pct(0.99), pct(1))
	if n := fallbacks.Load(); n > 0 {
		t.Errorf("%d events of the store's failures", n)
	}
	if asleep > 20 {
		t.Errorf("%d waits asleep; want at most 20", asleep)
	}
	if refused.Load() < waits-20-10-1 { // the burst, the queue, and the unit of the time it took
		t.Errorf("%d refused", refused.Load())
	}
	if duringG > 20+10 { // the waits asleep, and the Limiter's subscription and calls
		t.Errorf("goroutines +%d during the spike", duringG)
	}
}
