package throttle

import (
	"context"
	"strconv"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// BenchmarkLimitsWait is an uncontended wait on a key with two limits
// (requests and tokens), the key looked up on every wait as Transport
// does: the cost of the second limit against BenchmarkLimiterWait.
func BenchmarkLimitsWait(b *testing.B) {
	l := &Limiter{Limits: []Limit{
		{Rate: rate.Limit(1e12), Burst: 1 << 30},
		{Unit: "tokens", Rate: 1e15, Burst: 1 << 40},
	}}
	for i := range 1000 {
		l.For("host-" + strconv.Itoa(i))
	}
	ctx := context.Background()
	cost := Cost{N: 1, Units: map[string]int{"tokens": 500}}
	b.ReportAllocs()
	for b.Loop() {
		if err := l.For("api.example.com").Wait(ctx, cost); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLimitsRatio alternates batches of 1,000 uncontended waits on a
// one-limit key (WaitN) and on a two-limit key (Wait of a Cost of requests and
// tokens), each looked up each time, and reports the ratio of their times
// (two/one): both batches see the same host noise.
func BenchmarkLimitsRatio(b *testing.B) {
	one := &Limiter{Limits: []Limit{{Rate: rate.Limit(1e12), Burst: 1 << 30}}}
	two := &Limiter{Limits: []Limit{
		{Rate: rate.Limit(1e12), Burst: 1 << 30},
		{Unit: "tokens", Rate: 1e15, Burst: 1 << 40},
	}}
	for i := range 1000 {
		one.For("host-" + strconv.Itoa(i))
		two.For("host-" + strconv.Itoa(i))
	}
	ctx := context.Background()
	cost := Cost{N: 1, Units: map[string]int{"tokens": 500}}
	var t1, t2 time.Duration
	b.ReportAllocs()
	for b.Loop() {
		s := time.Now()
		for range 1000 {
			one.For("api.example.com").WaitN(ctx, 1)
		}
		m := time.Now()
		for range 1000 {
			two.For("api.example.com").Wait(ctx, cost)
		}
		t2 += time.Since(m)
		t1 += m.Sub(s)
	}
	b.ReportMetric(float64(t2)/float64(t1), "two/one")
}

// BenchmarkLimitsLogTry is a try on a full sliding log of MaxLogCount
// entries (an hour long): refused after reading the whole log, its worst
// case, against BenchmarkLimitsWait's uncontended wait.
func BenchmarkLimitsLogTry(b *testing.B) {
	l := &Limiter{Limits: []Limit{{Unit: "requests", Count: MaxLogCount, Per: time.Hour, Kind: SlidingLog}}}
	ctx := context.Background()
	one := Cost{N: 1, Units: map[string]int{"requests": 1}}
	w := l.For("api.example.com")
	for range MaxLogCount {
		if ok, _, err := w.Try(ctx, one); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if ok, _, err := w.Try(ctx, one); ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}
