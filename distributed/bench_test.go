package distributed

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttle-go/throttle"
	"golang.org/x/time/rate"
)

// trivialScript is the anchor: the cheapest EVALSHA round trip there is.
var trivialScript = redis.NewScript("return 1")

// BenchmarkWait compares a wait that never sleeps (a huge rate) with a raw
// EVALSHA of a trivial script on the same server and client, in one run:
// the difference is what throttle adds to the round trip it cannot avoid.
func BenchmarkWait(b *testing.B) {
	_, c := startRedis(b)
	ctx := context.Background()

	b.Run("anchor=evalsha-return-1", func(b *testing.B) {
		b.ReportAllocs()
		if err := trivialScript.Load(ctx, c).Err(); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if err := trivialScript.Run(ctx, c, nil).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("wait", func(b *testing.B) {
		b.ReportAllocs()
		w := New(c, "bench", throttle.Limit{Rate: rate.Limit(1e9), Burst: 1e6}).For("api.example.com")
		if err := w.WaitN(ctx, 1); err != nil { // loads the script
			b.Fatal(err)
		}
		for b.Loop() {
			if err := w.WaitN(ctx, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkWaitRatio alternates a wait and a raw EVALSHA of a trivial
// script, one each per iteration on the same server and client (each at
// every place in the iteration in turn), and reports
// the ratio of their mean times (wait/evalsha): on a noisy host both see
// the same noise, so the ratio is what throttle adds to the round trip.
// Through a client with go-redis's default options (ContextTimeoutEnabled
// false: calls go through its WithTimeout copy) and one with it. It also
// reports the wait against a `return 1` EVALSHA that carries the wait's
// key and arguments (wait/evalsha-args, a third call per iteration):
// what the script itself costs, beside what its arguments cost to send
// and for Redis to take in.
func BenchmarkWaitRatio(b *testing.B) {
	s, _ := startRedis(b)
	for _, tt := range []struct {
		name string
		opts redis.Options
	}{
		{"default", redis.Options{}},
		{"ContextTimeoutEnabled", redis.Options{ContextTimeoutEnabled: true}},
	} {
		b.Run(tt.name, func(b *testing.B) {
			opts := tt.opts
			opts.Addr = s.Addr()
			c := redis.NewClient(&opts)
			defer c.Close()
			benchWaitRatio(b, c)
		})
	}
}

func benchWaitRatio(b *testing.B, c *redis.Client) {
	ctx := context.Background()
	if err := trivialScript.Load(ctx, c).Err(); err != nil {
		b.Fatal(err)
	}
	q := New(c, "bench-ratio", throttle.Limit{Rate: rate.Limit(1e9), Burst: 1e6})
	defer q.Close()
	w := q.For("api.example.com")
	if err := w.WaitN(ctx, 1); err != nil { // loads the script
		b.Fatal(err)
	}
	// The arguments a wait sends once its key's state is known: op,
	// interval, burst, channel, n, queue, max wait, the state's id.
	kw := w.(*keyWaiter)
	known, _, _ := q.memo.args(kw.rkey)
	h := headerArgs{Op: "wait", Interval: q.config().interval, Burst: q.config().burstArg, Channel: kw.channel}
	args := waitArgs{N: 1, Queue: queueFirst, Maxwait: "", KnownID: known}.append(h.append(nil))
	// The three calls take turns at each place in an iteration: which
	// call comes first after the loop's own work, and which follows
	// which, changes a call's time on this 2-core VM by up to a fifth.
	calls := []func() error{
		func() error { return trivialScript.Run(ctx, c, nil).Err() },
		func() error { return w.WaitN(ctx, 1) },
		func() error { return trivialScript.Run(ctx, c, kw.keys, args...).Err() },
	}
	sums := rotated(b, calls)
	anchor, wait, shaped := sums[0], sums[1], sums[2]
	b.ReportMetric(float64(wait)/float64(anchor), "wait/evalsha")
	b.ReportMetric(float64(wait)/float64(shaped), "wait/evalsha-args")
}

// rotated runs calls once each per iteration of b's loop, each at every
// place in an iteration in turn, and returns each call's total time.
func rotated(b *testing.B, calls []func() error) []time.Duration {
	sums := make([]time.Duration, len(calls))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		for j := range calls {
			k := (i + j) % len(calls)
			t := time.Now()
			if err := calls[k](); err != nil {
				b.Fatal(err)
			}
			sums[k] += time.Since(t)
		}
		i++
	}
	return sums
}
