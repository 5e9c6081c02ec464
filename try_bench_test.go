package throttle

import (
	"context"
	"strconv"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// BenchmarkTryRatio alternates batches of 1,000 uncontended tries on
// rate.Limiter.AllowN (the anchor) and TryN on a Limiter key looked up
// each time, and reports the ratio of their times (try/allow).
func BenchmarkTryRatio(b *testing.B) {
	anchor := rate.NewLimiter(rate.Limit(1e12), 1<<30)
	l := &Limiter{Limit: rate.Limit(1e12), Burst: 1 << 30}
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
			l.For("api.example.com").(Trier).TryN(ctx, 1)
		}
		tl += time.Since(t1)
		ta += t1.Sub(t0)
	}
	b.ReportMetric(float64(tl)/float64(ta), "try/allow")
}
