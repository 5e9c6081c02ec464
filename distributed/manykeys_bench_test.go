package distributed

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/internal/redistest"
)

// manyKeys is the number of quota keys BenchmarkManyKeys spreads its
// waits over (issue 10: thousands of keys on one Redis or Cluster).
const manyKeys = 10000

// BenchmarkManyKeys measures decisions a second over 10,000 keys, from 32
// goroutines, on one redis-server and on a Cluster of three masters, each
// against its floor in the same run: a raw EVALSHA of a trivial script on
// the same keys (so that the Cluster routes it to the same slots). The
// two sub-benchmarks of a target alternate under -count; decisions/s is
// b.N over the wall time. The rate is far above the load (no wait
// sleeps): what is measured is the cost of a decision.
//
//	go test -run '^$' -bench BenchmarkManyKeys -count 4 ./distributed
func BenchmarkManyKeys(b *testing.B) {
	keys := make([]string, manyKeys)
	for i := range keys {
		keys[i] = "tenant-" + strconv.Itoa(i)
	}
	targets := []struct {
		name   string
		client func(b *testing.B) redis.UniversalClient
	}{
		{"single", func(b *testing.B) redis.UniversalClient {
			s := redistest.Start(b)
			return redis.NewClient(&redis.Options{Addr: s.Addr(), PoolSize: 32})
		}},
		{"cluster3", func(b *testing.B) redis.UniversalClient {
			cl := redistest.StartCluster(b)
			return redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), PoolSize: 32, ContextTimeoutEnabled: true})
		}},
	}
	for _, tg := range targets {
		b.Run(tg.name, func(b *testing.B) {
			c := tg.client(b)
			defer c.Close()
			ctx := context.Background()
			q := New(c, "many", throttle.Limit{Rate: rate.Limit(1e9), Burst: 1e6})
			defer q.Close()
			ws := make([]interface {
				WaitN(context.Context, int) error
			}, len(keys))
			rkeys := make([][]string, len(keys))
			for i, k := range keys {
				ws[i] = q.For(k)
				rkeys[i] = []string{redisKey("", "many", k)}
			}
			if err := ws[0].WaitN(ctx, 1); err != nil { // loads the script
				b.Fatal(err)
			}
			if err := trivialScript.Load(ctx, c).Err(); err != nil {
				b.Fatal(err)
			}
			run := func(b *testing.B, op func(i int) error) {
				var next atomic.Int64
				b.SetParallelism(16)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						i := int(next.Add(1)) % len(keys)
						if err := op(i); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
			}
			b.Run("floor=evalsha-return-1", func(b *testing.B) {
				run(b, func(i int) error { return trivialScript.Run(ctx, c, rkeys[i]).Err() })
			})
			b.Run("wait", func(b *testing.B) {
				cc, cluster := c.(*redis.ClusterClient)
				if cluster {
					resetStats(b, cc)
				}
				run(b, func(i int) error { return ws[i].WaitN(ctx, 1) })
				if cluster {
					// What a 2-core machine can show of scaling: the
					// decisions spread over the masters (a third each is
					// even), so each master serves its share of the keys.
					b.ReportMetric(busiestShare(b, cc), "busiest-master-share")
				}
			})
		})
	}
}

// resetStats resets every master's command statistics.
func resetStats(b *testing.B, cc *redis.ClusterClient) {
	b.Helper()
	err := cc.ForEachMaster(context.Background(), func(ctx context.Context, m *redis.Client) error {
		return m.ConfigResetStat(ctx).Err()
	})
	if err != nil {
		b.Fatal(err)
	}
}

// busiestShare returns the share of the EVALSHA calls since resetStats
// that the busiest master served.
func busiestShare(b *testing.B, cc *redis.ClusterClient) float64 {
	b.Helper()
	var mu sync.Mutex
	var calls []float64
	err := cc.ForEachMaster(context.Background(), func(ctx context.Context, m *redis.Client) error {
		info, err := m.Info(ctx, "commandstats").Result()
		if err != nil {
			return err
		}
		n := 0.0
		for _, l := range strings.Split(info, "\n") {
			if rest, ok := strings.CutPrefix(l, "cmdstat_evalsha:calls="); ok {
				v, _, _ := strings.Cut(rest, ",")
				n, _ = strconv.ParseFloat(v, 64)
			}
		}
		mu.Lock()
		calls = append(calls, n)
		mu.Unlock()
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	total, most := 0.0, 0.0
	for _, n := range calls {
		total += n
		most = max(most, n)
	}
	if len(calls) != 3 || total == 0 {
		b.Fatalf("EVALSHA calls per master %v; want three masters that served some", calls)
	}
	return most / total
}
