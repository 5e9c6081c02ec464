package otelthrottle_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/otelthrottle"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// What recording costs: one event, and one request through Wrap (its
// state, and reading the response's quota) against a bare call of the
// same RoundTripper.
func BenchmarkRecorder(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer mp.Shutdown(context.Background())
	rec := &otelthrottle.Recorder{MeterProvider: mp, Keys: 10}
	req, _ := http.NewRequest("GET", "http://api.example/", nil)
	resp := httptest.NewRecorder().Result()
	resp.Header.Set("X-RateLimit-Limit", "5000")
	resp.Header.Set("X-RateLimit-Remaining", "4999")
	base := roundTripFunc(func(*http.Request) (*http.Response, error) { return resp, nil })

	b.Run("OnEvent/wait", func(b *testing.B) {
		e := throttle.Event{Kind: throttle.EventWait, Request: req, Key: "api.example", Attempt: 1, Delay: 10 * time.Millisecond}
		b.ReportAllocs()
		for b.Loop() {
			rec.OnEvent(e)
		}
	})
	b.Run("OnEvent/retry", func(b *testing.B) {
		e := throttle.Event{Kind: throttle.EventRetry, Request: req, Key: "api.example", Attempt: 1, Delay: time.Second, StatusCode: 429}
		b.ReportAllocs()
		for b.Loop() {
			rec.OnEvent(e)
		}
	})
	b.Run("bare", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			base.RoundTrip(req)
		}
	})
	b.Run("Wrap", func(b *testing.B) {
		rt := rec.Wrap(base)
		b.ReportAllocs()
		for b.Loop() {
			rt.RoundTrip(req)
		}
	})
}
