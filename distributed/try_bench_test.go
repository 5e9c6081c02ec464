package distributed

import (
	"context"
	"testing"
	"time"

	"github.com/throttle-go/throttle"
	"golang.org/x/time/rate"
)

// BenchmarkTryRatio alternates a try and a raw EVALSHA of a trivial
// script, as BenchmarkWaitRatio does for a wait, and reports the ratio of
// their mean times (try/evalsha). A try runs the script's whole model
// (the fast path is a wait's).
func BenchmarkTryRatio(b *testing.B) {
	_, c := startRedis(b)
	ctx := context.Background()
	if err := trivialScript.Load(ctx, c).Err(); err != nil {
		b.Fatal(err)
	}
	w := New(c, "bench-try", throttle.Limit{Rate: rate.Limit(1e9), Burst: 1e6}).For("api.example.com")
	if _, _, err := w.Try(ctx, throttle.Cost{N: 1}); err != nil { // loads the script
		b.Fatal(err)
	}
	var anchor, try time.Duration
	b.ReportAllocs()
	for b.Loop() {
		t0 := time.Now()
		if err := trivialScript.Run(ctx, c, nil).Err(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if ok, _, err := w.Try(ctx, throttle.Cost{N: 1}); err != nil || !ok {
			b.Fatal(ok, err)
		}
		try += time.Since(t1)
		anchor += t1.Sub(t0)
	}
	b.ReportMetric(float64(try)/float64(anchor), "try/evalsha")
}
