package otelthrottle_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/otelthrottle"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// A Transport paced at 10 requests a second, whose server rejects the
// first request with a 429 and "Retry-After: 0": the Recorder counts the
// requests, the retry and the waits, and the slow-down and shift of the
// key's schedule the Limiter took for a rejection within its limit (a
// key two units deep: one a unit deep takes its first for a strict
// server's timing, and keeps its pace). A program would pass its own
// MeterProvider (with an OTLP or Prometheus exporter), or none for the
// global one; the example reads the metrics back with a ManualReader.
func Example() {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()

	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())

	rec := &otelthrottle.Recorder{MeterProvider: mp}
	t := &throttle.Transport{
		Base:    srv.Client().Transport,
		Waiter:  &throttle.Limiter{Limits: []throttle.Limit{{Rate: 10, Burst: 2}}},
		OnEvent: rec.OnEvent,
	}
	client := &http.Client{Transport: rec.Wrap(t)}
	for range 3 {
		resp, err := client.Get(srv.URL)
		if err != nil {
			fmt.Println(err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}

	var rm metricdata.ResourceMetrics
	reader.Collect(context.Background(), &rm)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		switch d := m.Data.(type) {
		case metricdata.Sum[int64]:
			for _, dp := range d.DataPoints {
				fmt.Printf("%s{%s} %d\n", m.Name, attrString(dp.Attributes), dp.Value)
			}
		case metricdata.Histogram[float64]:
			for _, dp := range d.DataPoints {
				fmt.Printf("%s{%s} count %d\n", m.Name, attrString(dp.Attributes), dp.Count)
			}
		}
	}
	// Unordered output:
	// throttle.wait.duration{} count 3
	// throttle.retries{http.response.status_code=429} 1
	// throttle.retry.delay{http.response.status_code=429} count 1
	// throttle.requests{http.response.status_code=200 throttle.outcome=ok} 3
	// throttle.events{throttle.event=retry} 1
	// throttle.events{throttle.event=wait} 3
	// throttle.events{throttle.event=slow-down} 1
	// throttle.events{throttle.event=shift} 1
	// throttle.event.delay{throttle.event=shift} count 1
	// throttle.slowdowns{} 1
}
