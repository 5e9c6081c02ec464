package view_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/view"
)

// BenchmarkHandler: a request for the view of 100 keys, as JSON and as
// HTML, against its anchor, 100 Quota.State calls: ratio is the request's
// time over the anchor's, both measured in the same run.
func BenchmarkHandler(b *testing.B) {
	const keys = 100
	ctx := context.Background()
	lim := &throttle.Limiter{Limits: []throttle.Limit{{Rate: 1, Burst: 5}}}
	var qs []throttle.Quota
	for i := range keys {
		q := lim.For(fmt.Sprintf("api-%03d.example.com", i))
		if err := q.Wait(ctx); err != nil {
			b.Fatal(err)
		}
		qs = append(qs, q)
	}
	states := func(n int) time.Duration {
		start := time.Now()
		for range n {
			for _, q := range qs {
				if _, err := q.State(ctx); err != nil {
					b.Fatal(err)
				}
			}
		}
		return time.Since(start)
	}
	h := &view.Handler{Limiters: map[string]view.Source{"lim": lim}}
	for _, target := range []string{"/?format=json", "/"} {
		name := "json"
		if target == "/" {
			name = "html"
		}
		b.Run(name, func(b *testing.B) {
			req := httptest.NewRequest("GET", target, nil)
			b.ReportAllocs()
			start := time.Now()
			n := 0
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				n++
			}
			served := time.Since(start)
			anchor := states(n)
			b.ReportMetric(float64(anchor.Nanoseconds())/float64(n), "state100-ns/op")
			b.ReportMetric(float64(served)/float64(anchor), "ratio")
		})
	}
}
