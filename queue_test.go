package throttle

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"
)

// TestQueueFull: with MaxQueued 3 on a key of 10/s (burst 1), the burst
// goes, three waits queue, and the fourth, and a reservation, fail at
// once with ErrQueueFull, naming the key and the numbers, each reported
// as an EventQueueFull to OnEvent and to the call's WithEvents; the waits
// queued keep their turns (100, 200, 300 ms), a try is unaffected, and
// once the queue has room a wait queues again.
func TestQueueFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var got, ctxGot []Event
		lim := &Limiter{Limits: []Limit{{Rate: 10, Burst: 1}}, MaxQueued: 3, OnEvent: func(e Event) {
			mu.Lock()
			got = append(got, e)
			mu.Unlock()
		}}
		q := lim.For("api")
		ctx := context.Background()
		start := time.Now()
		if err := q.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		took := make([]time.Duration, 3)
		for i := range 3 {
			wg.Go(func() {
				if err := q.Wait(ctx); err != nil {
					t.Error(err)
				}
				took[i] = time.Since(start)
			})
			synctest.Wait() // queued in order
		}
		ectx := WithEvents(ctx, func(e Event) { ctxGot = append(ctxGot, e) })
		err := q.Wait(ectx)
		if !errors.Is(err, ErrQueueFull) {
			t.Fatalf("4th wait: %v, want ErrQueueFull", err)
		}
		for _, s := range []string{`1 units of "api"`, "MaxQueued 3", "(3 queued)"} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("error %q does not say %s", err, s)
			}
		}
		if _, err := q.Reserve(ctx); !errors.Is(err, ErrQueueFull) {
			t.Errorf("reservation: %v, want ErrQueueFull", err)
		}
		if st, _ := q.State(ctx); st.Queued != 3 {
			t.Errorf("queued after the refusals: %v, want 3", st.Queued)
		}
		if ok := q.Allow(); ok {
			t.Error("Allow with the key spent: true")
		}
		if time.Since(start) != 0 {
			t.Errorf("refusals took %v of the bubble's time", time.Since(start))
		}
		wg.Wait()
		for i, d := range took {
			if want := time.Duration(i+1) * 100 * time.Millisecond; d != want {
				t.Errorf("queued wait %d went at %v, want %v", i, d, want)
			}
		}
		// The queue has room again.
		if err := q.Wait(ctx); err != nil {
			t.Errorf("wait after the queue drained: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(got) != 2 || got[0].Kind != EventQueueFull || got[0].Key != "api" || got[0].Units != 1 ||
			!errors.Is(got[0].Err, ErrQueueFull) || got[1].Units != 1 {
			t.Errorf("OnEvent got %+v, want 2 EventQueueFull of 1 unit", got)
		}
		if len(ctxGot) != 1 || ctxGot[0].Kind != EventQueueFull {
			t.Errorf("WithEvents got %+v, want one EventQueueFull", ctxGot)
		}
		if s := EventQueueFull.String(); s != "queue-full" {
			t.Errorf("String: %q", s)
		}
	})
}

// TestQueueSpikeBounded: a key of 10/s (burst 10) under a 10× spike, 100
// waits a second each in its own goroutine, for 10 s: with MaxQueued 20
// the goroutines asleep in a wait stay at 20 (their stacks with them),
// the rest refused at once; without a bound they pile up (900 after
// 10 s). The waits in progress are counted by the test's own counter
// after each second's arrivals (runtime.NumGoroutine is the process's,
// which tests running in parallel move); no goroutine is left after
// (goleak, in TestMain). The heap in use is logged, not checked: it is
// the process's too.
func TestQueueSpikeBounded(t *testing.T) {
	type spike struct {
		peakG, refused int
		mem            [10]int64 // heap in use after each second's arrivals, KiB
	}
	run := func(maxQueued int) (r spike) {
		synctest.Test(t, func(t *testing.T) {
			var ms runtime.MemStats
			var inWait atomic.Int64 // waits in progress
			lim := &Limiter{Limits: []Limit{{Rate: 10, Burst: 10}}, MaxQueued: maxQueued}
			q := lim.For("k")
			ctx, cancel := context.WithCancel(context.Background())
			var mu sync.Mutex
			var wg sync.WaitGroup
			for i := range 10 {
				for range 100 {
					wg.Go(func() {
						inWait.Add(1)
						defer inWait.Add(-1)
						err := q.Wait(ctx)
						if errors.Is(err, ErrQueueFull) {
							mu.Lock()
							r.refused++
							mu.Unlock()
						}
					})
				}
				synctest.Wait()
				runtime.GC()
				runtime.ReadMemStats(&ms)
				r.peakG = max(r.peakG, int(inWait.Load()))
				r.mem[i] = int64(ms.HeapInuse) >> 10
				time.Sleep(time.Second)
			}
			cancel()
			wg.Wait()
		})
		return r
	}
	b, u := run(20), run(0)
	t.Logf("MaxQueued 20: peak %d goroutines waiting, heap in use %d → %d KiB (1st → 10th second), %d of 1000 refused",
		b.peakG, b.mem[0], b.mem[9], b.refused)
	t.Logf("no bound:     peak %d goroutines waiting, heap in use %d → %d KiB (1st → 10th second), %d of 1000 refused",
		u.peakG, u.mem[0], u.mem[9], u.refused)
	if b.peakG > 20 {
		t.Errorf("with MaxQueued 20, %d goroutines waiting", b.peakG)
	}
	if b.refused < 1000-20-10-100 { // at most the burst, the queue and the 10 s' units go
		t.Errorf("with MaxQueued 20, %d refused", b.refused)
	}
	if u.peakG < 800 {
		t.Errorf("without a bound, %d goroutines waiting: the spike does not test the bound", u.peakG)
	}
}

// BenchmarkQueueFullRefusal measures a wait refused by a full queue
// (Limiter.MaxQueued, the queue held by a reservation), against
// rate.Limiter.Allow in the same run.
func BenchmarkQueueFullRefusal(b *testing.B) {
	b.Run("refused", func(b *testing.B) {
		lim := &Limiter{Limits: []Limit{{Rate: 0.001, Burst: 1}}, MaxQueued: 1} // a turn 1000 s away: the queue stays full
		q := lim.For("k")
		ctx := context.Background()
		q.Wait(ctx)
		if _, err := q.Reserve(ctx); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if err := q.Wait(ctx); err == nil {
				b.Fatal("not refused")
			}
		}
	})
	b.Run("rate.Allow", func(b *testing.B) {
		rl := rate.NewLimiter(0.001, 1)
		rl.Allow()
		b.ReportAllocs()
		for b.Loop() {
			if rl.Allow() {
				b.Fatal("allowed")
			}
		}
	})
}
