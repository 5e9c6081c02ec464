package distributed

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"
)

// BenchmarkWaitRatioDefaultClient is BenchmarkWaitRatio through a client
// with go-redis's default options (ContextTimeoutEnabled false): each
// call then runs in a goroutine of its own so that Timeout holds (see
// Quota.call). The ratio (wait/evalsha) against the same run's
// BenchmarkWaitRatio is that goroutine's cost.
func BenchmarkWaitRatioDefaultClient(b *testing.B) {
	s, _ := startRedis(b)
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	b.Cleanup(func() { c.Close() })
	ctx := context.Background()
	if err := trivialScript.Load(ctx, c).Err(); err != nil {
		b.Fatal(err)
	}
	q := New(c, "bench-ratio", rate.Limit(1e9), 1e6)
	defer q.Close()
	w := q.For("api.example.com")
	if err := w.WaitN(ctx, 1); err != nil { // loads the script
		b.Fatal(err)
	}
	var anchor, wait time.Duration
	b.ReportAllocs()
	for b.Loop() {
		t0 := time.Now()
		if err := trivialScript.Run(ctx, c, nil).Err(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := w.WaitN(ctx, 1); err != nil {
			b.Fatal(err)
		}
		wait += time.Since(t1)
		anchor += t1.Sub(t0)
	}
	b.ReportMetric(float64(wait)/float64(anchor), "wait/evalsha")
}
