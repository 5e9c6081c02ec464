package throttle

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/throttle-go/throttle/throttletest"
)

// saturate runs workers goroutines of class p that wait for one unit of
// l's key "k" in a loop until ctx ends, and counts the units they got.
func saturate(ctx context.Context, wg *sync.WaitGroup, l *Limiter, p Priority, workers int, got *atomic.Int64) {
	q := l.For("k")
	for range workers {
		wg.Go(func() {
			ctx := WithPriority(ctx, p)
			for q.WaitN(ctx, 1) == nil {
				got.Add(1)
			}
		})
	}
}

// TestPriorityCriticalNext: a key of 100/s, burst 1, saturated by 16
// default and 16 background workers; a critical wait every 37 ms for
// 10 s waits at most one interval (10 ms) every time, where a
// default-class wait would wait its turn behind the 16 default ones
// queued. The others get every unit the critical waits leave.
func TestPriorityCriticalNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limits: []Limit{{Rate: 100, Burst: 1}}}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		var bg, def atomic.Int64
		saturate(ctx, &wg, l, PriorityBackground, 16, &bg)
		saturate(ctx, &wg, l, PriorityDefault, 16, &def)
		time.Sleep(time.Second) // the queue full of background waits
		var waits []time.Duration
		crit := WithPriority(ctx, PriorityCritical)
		for range 270 {
			start := time.Now()
			if err := l.For("k").WaitN(crit, 1); err != nil {
				t.Fatal(err)
			}
			waits = append(waits, time.Since(start))
			time.Sleep(37 * time.Millisecond)
		}
		cancel()
		wg.Wait()
		slices.Sort(waits)
		if p99 := waits[len(waits)*99/100]; p99 > 10*time.Millisecond {
			t.Errorf("critical waits' p99 %v; want ≤ 10ms (one interval of 100/s)", p99)
		}
		if worst := waits[len(waits)-1]; worst > 10*time.Millisecond {
			t.Errorf("the longest critical wait %v; want ≤ 10ms", worst)
		}
		t.Logf("critical waits: median %v, p99 %v, max %v; default units %d, background %d", waits[len(waits)/2], waits[len(waits)*99/100], waits[len(waits)-1], def.Load(), bg.Load())
	})
}

// TestPriorityShares: classes saturating one key share it by their
// weights (16 critical, 4 default, 1 background): background beside
// critical gets 1/17 of the units, beside default 1/5; the three
// together 16:4:1. Each share within a unit or two of its weight's over
// 10 s (1,000 units), so no class starves.
func TestPriorityShares(t *testing.T) {
	for _, tc := range []struct {
		name    string
		classes []Priority
		weights []float64
	}{
		{"critical+background", []Priority{PriorityCritical, PriorityBackground}, []float64{16, 1}},
		{"default+background", []Priority{PriorityDefault, PriorityBackground}, []float64{4, 1}},
		{"all three", []Priority{PriorityCritical, PriorityDefault, PriorityBackground}, []float64{16, 4, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := &Limiter{Limits: []Limit{{Rate: 100, Burst: 1}}}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				var wg sync.WaitGroup
				got := make([]atomic.Int64, len(tc.classes))
				for i, p := range tc.classes {
					saturate(ctx, &wg, l, p, 8, &got[i])
				}
				wg.Wait()
				total, sum := 0.0, 0.0
				for i := range got {
					total += float64(got[i].Load())
				}
				for _, w := range tc.weights {
					sum += w
				}
				for i, p := range tc.classes {
					want := total * tc.weights[i] / sum
					if g := float64(got[i].Load()); g < want-2 || g > want+2 {
						t.Errorf("%v: %v of %v units; want %.1f ± 2 (weight %v of %v)", p, g, total, want, tc.weights[i], sum)
					}
				}
			})
		})
	}
}

// TestTransportPriority: a Transport's first attempts take their
// request's class: with 16 background requests in flight at a time on a
// key of 100/s, a critical request waits at most one interval before it
// is sent, every time.
func TestTransportPriority(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
		client := &http.Client{Transport: &Transport{
			Waiter: &Limiter{Limits: []Limit{{Rate: 100, Burst: 1}}},
			Base:   &throttletest.Direct{Handler: ok, Latency: time.Millisecond},
		}}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				bg := WithPriority(ctx, PriorityBackground)
				for ctx.Err() == nil {
					req, _ := http.NewRequestWithContext(bg, "GET", "http://api.example.com/batch", nil)
					if resp, err := client.Do(req); err == nil {
						resp.Body.Close()
					}
				}
			})
		}
		time.Sleep(time.Second)
		var worst time.Duration
		for range 50 {
			req, _ := http.NewRequestWithContext(WithPriority(ctx, PriorityCritical), "GET", "http://api.example.com/now", nil)
			start := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			worst = max(worst, time.Since(start)-2*time.Millisecond) // less the round trip
			time.Sleep(53 * time.Millisecond)
		}
		cancel()
		wg.Wait()
		if worst > 10*time.Millisecond {
			t.Errorf("a critical request waited %v before it was sent; want ≤ 10ms (one interval of 100/s)", worst)
		}
	})
}
