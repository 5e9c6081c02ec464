package throttle

import (
	"context"
	"runtime"
	"strconv"
	"testing"

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
	l := &Limiter{Limit: rate.Limit(1e12), Burst: 1 << 30}
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
		l = &Limiter{Limit: 1e6, Burst: 1}
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
