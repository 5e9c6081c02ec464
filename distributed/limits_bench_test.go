package distributed

import (
	"context"
	"testing"
	"time"

	"github.com/throttle-go/throttle"
	"golang.org/x/time/rate"
)

// BenchmarkLimitsWaitRatio alternates a raw EVALSHA of a trivial script,
// a wait on a one-limit quota and a wait on a quota with a further limit
// (tokens, Wait of a Cost), one each per iteration (each at every place in the
// iteration in turn) on the same server and
// client, neither taking leased turns (one script call per wait), and
// reports the ratios of their mean times: what the second limit adds
// (mwait's shortcut against the fast path) and the round trip.
func BenchmarkLimitsWaitRatio(b *testing.B) {
	_, c := startRedis(b)
	ctx := context.Background()
	if err := trivialScript.Load(ctx, c).Err(); err != nil {
		b.Fatal(err)
	}
	one := New(c, "bench-one", throttle.Limit{Rate: rate.Limit(1e9), Burst: 1e6})
	one.MaxLease = 1
	two := New(c, "bench-two", throttle.Limit{Rate: rate.Limit(1e9), Burst: 1e6}, throttle.Limit{Unit: "tokens", Rate: 1e12, Burst: 1 << 40})
	defer one.Close()
	defer two.Close()
	w1 := one.For("api.example.com")
	w2 := two.For("api.example.com")
	cost := throttle.Cost{N: 1, Units: map[string]int{"tokens": 500}}
	if err := w1.WaitN(ctx, 1); err != nil { // loads the script
		b.Fatal(err)
	}
	// Each call takes every place in an iteration in turn (see
	// BenchmarkWaitRatio).
	calls := []func() error{
		func() error { return trivialScript.Run(ctx, c, nil).Err() },
		func() error { return w1.WaitN(ctx, 1) },
		func() error { return w2.Wait(ctx, cost) },
	}
	sums := rotated(b, calls)
	anchor, t1, t2 := sums[0], sums[1], sums[2]
	b.ReportMetric(float64(t1)/float64(anchor), "one/evalsha")
	b.ReportMetric(float64(t2)/float64(anchor), "two/evalsha")
	b.ReportMetric(float64(t2)/float64(t1), "two/one")
}

// BenchmarkLimitsLogTry measures a sliding log at its largest: a try on
// a log of MaxLogCount entries (one a wait, an hour long, full: the try
// is refused after reading the whole log), against the same try on a
// full fixed window of the same count (one entry's worth of state).
func BenchmarkLimitsLogTry(b *testing.B) {
	_, c := startRedis(b)
	ctx := context.Background()
	n := throttle.MaxLogCount
	mk := func(name string, kind throttle.WindowKind) *Limiter {
		return New(c, name, throttle.Limit{Rate: rate.Limit(1e9), Burst: 1e6},
			throttle.Limit{Unit: "requests", Count: n, Per: time.Hour, Kind: kind})
	}
	log := mk("bench-log", throttle.SlidingLog)
	fixed := mk("bench-fixed", throttle.Fixed)
	defer log.Close()
	defer fixed.Close()
	one := throttle.Cost{N: 1, Units: map[string]int{"requests": 1}}
	wl, wf := log.For("k"), fixed.For("k")
	for range n { // n entries: one a call, at distinct µs
		if err := wl.Wait(ctx, one); err != nil {
			b.Fatal(err)
		}
	}
	if err := wf.Wait(ctx, throttle.Cost{N: 1, Units: map[string]int{"requests": n}}); err != nil {
		b.Fatal(err)
	}
	tl, tf := wl, wf
	var dl, df time.Duration
	b.ReportAllocs()
	for b.Loop() {
		s := time.Now()
		if ok, _, err := tl.Try(ctx, one); ok || err != nil {
			b.Fatalf("log: %v, %v; want refused", ok, err)
		}
		m := time.Now()
		if ok, _, err := tf.Try(ctx, one); ok || err != nil {
			b.Fatalf("fixed: %v, %v; want refused", ok, err)
		}
		dl += m.Sub(s)
		df += time.Since(m)
	}
	b.ReportMetric(float64(dl)/float64(b.N), "log-ns/try")
	b.ReportMetric(float64(df)/float64(b.N), "fixed-ns/try")
	b.ReportMetric(float64(dl)/float64(df), "log/fixed")
}
