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
// (tokens, WaitCost), one each per iteration (each at every place in the
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
	one := New(c, "bench-one", rate.Limit(1e9), 1e6)
	one.MaxLease = 1
	two := New(c, "bench-two", rate.Limit(1e9), 1e6)
	two.Limits = []throttle.UnitLimit{{Unit: "tokens", Rate: throttle.Rate{Limit: 1e12, Burst: 1 << 40}}}
	defer one.Close()
	defer two.Close()
	w1 := one.For("api.example.com")
	w2 := two.For("api.example.com").(throttle.CostWaiter)
	cost := throttle.Cost{Units: []throttle.UnitCost{{Unit: "tokens", N: 500}}}
	if err := w1.WaitN(ctx, 1); err != nil { // loads the script
		b.Fatal(err)
	}
	// Each call takes every place in an iteration in turn (see
	// BenchmarkWaitRatio).
	calls := []func() error{
		func() error { return trivialScript.Run(ctx, c, nil).Err() },
		func() error { return w1.WaitN(ctx, 1) },
		func() error { return w2.WaitCost(ctx, cost) },
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
	mk := func(name string, w throttle.Window) *Limiter {
		q := New(c, name, rate.Limit(1e9), 1e6)
		q.Limits = []throttle.UnitLimit{{Unit: "requests", Window: w}}
		return q
	}
	log := mk("bench-log", throttle.Window{Count: n, Per: time.Hour, Log: true})
	fixed := mk("bench-fixed", throttle.Window{Count: n, Per: time.Hour})
	defer log.Close()
	defer fixed.Close()
	one := throttle.Cost{Units: []throttle.UnitCost{{Unit: "requests", N: 1}}}
	wl, wf := log.For("k").(throttle.CostWaiter), fixed.For("k").(throttle.CostWaiter)
	for range n { // n entries: one a call, at distinct µs
		if err := wl.WaitCost(ctx, one); err != nil {
			b.Fatal(err)
		}
	}
	if err := wf.WaitCost(ctx, throttle.Cost{Units: []throttle.UnitCost{{Unit: "requests", N: n}}}); err != nil {
		b.Fatal(err)
	}
	tl, tf := wl.(throttle.CostTrier), wf.(throttle.CostTrier)
	var dl, df time.Duration
	b.ReportAllocs()
	for b.Loop() {
		s := time.Now()
		if ok, _, err := tl.TryCost(ctx, one); ok || err != nil {
			b.Fatalf("log: %v, %v; want refused", ok, err)
		}
		m := time.Now()
		if ok, _, err := tf.TryCost(ctx, one); ok || err != nil {
			b.Fatalf("fixed: %v, %v; want refused", ok, err)
		}
		dl += m.Sub(s)
		df += time.Since(m)
	}
	b.ReportMetric(float64(dl)/float64(b.N), "log-ns/try")
	b.ReportMetric(float64(df)/float64(b.N), "fixed-ns/try")
	b.ReportMetric(float64(dl)/float64(df), "log/fixed")
}
