package throttle

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// The anchor: x/time/rate's own uncontended Wait that needs no sleep.
func BenchmarkRateLimiterWait(b *testing.B) {
	l := rate.NewLimiter(rate.Limit(1e12), 1<<30)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := l.Wait(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// The same through the per-key Limiter, looking the key up on every wait as
// Transport does.
func BenchmarkLimiterWait(b *testing.B) {
	l := &Limiter{Limits: []Limit{{Rate: rate.Limit(1e12), Burst: 1 << 30}}}
	for i := range 1000 { // a realistic number of other keys
		l.For("host-" + strconv.Itoa(i))
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := l.For("api.example.com").WaitN(ctx, 1); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLimiterDistinctKeys waits once on each of a million distinct
// keys and reports how many the Limiter remembers at the end (keys) and
// the live heap it holds (heap-MB). Memory stays bounded: full buckets are
// forgotten as new keys arrive.
func BenchmarkLimiterDistinctKeys(b *testing.B) {
	const n = 1 << 20
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "tenant-" + strconv.Itoa(i)
	}
	var l *Limiter
	for b.Loop() {
		l = &Limiter{Limits: []Limit{{Rate: 1e6, Burst: 1}}}
		for _, k := range keys {
			l.For(k).WaitN(context.Background(), 1)
		}
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(l.Len()), "keys")
	b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "heap-MB")
	runtime.KeepAlive(keys)
	runtime.KeepAlive(l)
}

// BenchmarkLimiterRatio alternates batches of 1,000 uncontended waits on
// rate.Limiter (the anchor) and on a Limiter key looked up each time, and
// reports the ratio of their times (limiter/rate): both batches see the
// same host noise.
func BenchmarkLimiterRatio(b *testing.B) {
	anchor := rate.NewLimiter(rate.Limit(1e12), 1<<30)
	l := &Limiter{Limits: []Limit{{Rate: rate.Limit(1e12), Burst: 1 << 30}}}
	for i := range 1000 {
		l.For("host-" + strconv.Itoa(i))
	}
	ctx := context.Background()
	var ta, tl time.Duration
	b.ReportAllocs()
	for b.Loop() {
		t0 := time.Now()
		for range 1000 {
			anchor.Wait(ctx)
		}
		t1 := time.Now()
		for range 1000 {
			l.For("api.example.com").WaitN(ctx, 1)
		}
		tl += time.Since(t1)
		ta += t1.Sub(t0)
	}
	b.ReportMetric(float64(tl)/float64(ta), "limiter/rate")
}

// BenchmarkTryRatio alternates batches of 1,000 uncontended tries on
// rate.Limiter.AllowN (the anchor) and Try on a Limiter key looked up
// each time, and reports the ratio of their times (try/allow).
func BenchmarkTryRatio(b *testing.B) {
	anchor := rate.NewLimiter(rate.Limit(1e12), 1<<30)
	l := &Limiter{Limits: []Limit{{Rate: rate.Limit(1e12), Burst: 1 << 30}}}
	for i := range 1000 {
		l.For("host-" + strconv.Itoa(i))
	}
	ctx := context.Background()
	var ta, tl time.Duration
	b.ReportAllocs()
	for b.Loop() {
		t0 := time.Now()
		for range 1000 {
			anchor.AllowN(time.Now(), 1)
		}
		t1 := time.Now()
		for range 1000 {
			l.For("api.example.com").Try(ctx)
		}
		tl += time.Since(t1)
		ta += t1.Sub(t0)
	}
	b.ReportMetric(float64(tl)/float64(ta), "try/allow")
}
