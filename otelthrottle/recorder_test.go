package otelthrottle_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/otelthrottle"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// limitedServer is a rate-limited API, one behaviour a path:
//
//	/limited  the first request: 429 Retry-After: 1; then 200 with
//	          X-RateLimit-Limit: 100 and -Remaining counting down
//	/flaky    the first request: 503 with nothing said; then 200
//	/down     429 Retry-After: 5, longer than the client's MaxRetryAfter
//	/spent    200 whose quota is spent: Remaining 0, Reset-After 0.05 s
//	/slow     200
func limitedServer(t *testing.T) *httptest.Server {
	t.Helper()
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path]++
		n := seen[r.URL.Path]
		mu.Unlock()
		h := w.Header()
		switch r.URL.Path {
		case "/limited":
			if n == 1 {
				h.Set("Retry-After", "1")
				w.WriteHeader(http.StatusTooManyRequests)
				return
			}
			h.Set("X-RateLimit-Limit", "100")
			h.Set("X-RateLimit-Remaining", strconv.Itoa(100-n))
		case "/flaky":
			if n == 1 {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
		case "/down":
			h.Set("Retry-After", "5")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		case "/spent":
			h.Set("X-RateLimit-Limit", "5")
			h.Set("X-RateLimit-Remaining", "0")
			h.Set("X-RateLimit-Reset-After", "0.05")
		}
		io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// run sends the scenario's requests through a Transport recorded by rec,
// each in a span of its own named after its path and number. It takes
// about 1.3 s: the 429's Retry-After of 1 s, and three waits of 100 ms.
func run(t *testing.T, rec *otelthrottle.Recorder, tp *sdktrace.TracerProvider) {
	t.Helper()
	srv := limitedServer(t)
	tr := &throttle.Transport{
		Base: srv.Client().Transport,
		Waiter: &throttle.Limiter{Overrides: map[string][]throttle.Limit{
			"/limited": {{Rate: 10, Burst: 1}},
			"/slow":    {{Rate: 0.1, Burst: 1}},
		}},
		Key: func(r *http.Request) string { return r.URL.Path },
		Retry: throttle.RetryPolicy{
			MaxRetryAfter:   2 * time.Second,
			InitialInterval: time.Millisecond,
			MaxInterval:     2 * time.Millisecond,
		},
		DisableAdaptive: true, // the bare 503 cuts no pace: the waits stay exact
		OnEvent:         rec.OnEvent,
	}
	client := &http.Client{Transport: rec.Wrap(tr)}
	tracer := tp.Tracer("test")

	get := func(path string, i int, timeout time.Duration) error {
		ctx, span := tracer.Start(context.Background(), fmt.Sprintf("%s#%d", path, i))
		defer span.End()
		if timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		req, err := http.NewRequestWithContext(ctx, "GET", srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return nil
	}
	for i := 1; i <= 4; i++ {
		if err := get("/limited", i, 0); err != nil {
			t.Fatalf("GET /limited #%d: %v", i, err)
		}
	}
	for _, path := range []string{"/flaky", "/down", "/spent", "/slow"} {
		if err := get(path, 1, 0); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
	}
	// The second /slow request's turn is 10 s away, past its deadline.
	if err := get("/slow", 2, time.Second); !errors.Is(err, throttle.ErrWouldExceedDeadline) {
		t.Fatalf("GET /slow #2: %v; want ErrWouldExceedDeadline", err)
	}
}

func newProviders(t *testing.T) (*sdkmetric.ManualReader, *sdkmetric.MeterProvider, *tracetest.SpanRecorder, *sdktrace.TracerProvider) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() {
		mp.Shutdown(context.Background())
		tp.Shutdown(context.Background())
	})
	return reader, mp, spans, tp
}

// TestMetrics runs the scenario and checks every series read back from the
// SDK's in-memory reader; the readout is logged (go test -v -run
// TestMetrics) for pasting into a report.
func TestMetrics(t *testing.T) {
	reader, mp, _, tp := newProviders(t)
	rec := &otelthrottle.Recorder{MeterProvider: mp, Keys: 10}
	start := time.Now()
	run(t, rec, tp)
	t.Logf("scenario ran in %v", time.Since(start).Round(time.Millisecond))
	ps := collect(t, reader)
	for _, p := range ps {
		t.Log(p)
	}

	const (
		giveUpReason = "server asked to wait longer than MaxRetryAfter"
	)
	// Counters, gauges and histogram counts: exact.
	want := []struct {
		metric, attrs string
		value         float64 // counter or gauge value, or histogram count
	}{
		{"throttle.events", "throttle.event=give-up throttle.key=/down", 1},
		{"throttle.events", "throttle.event=give-up throttle.key=/slow", 1},
		{"throttle.events", "throttle.event=pause throttle.key=/down", 1},
		{"throttle.events", "throttle.event=pause throttle.key=/limited", 1},
		{"throttle.events", "throttle.event=pause throttle.key=/spent", 1},
		{"throttle.events", "throttle.event=retry throttle.key=/flaky", 1},
		{"throttle.events", "throttle.event=retry throttle.key=/limited", 1},
		{"throttle.events", "throttle.event=wait throttle.key=/limited", 3},
		{"throttle.pause.duration", "http.response.status_code=200 throttle.key=/spent", 1},
		{"throttle.pause.duration", "http.response.status_code=429 throttle.key=/down", 1},
		{"throttle.pause.duration", "http.response.status_code=429 throttle.key=/limited", 1},
		{"throttle.pauses", "http.response.status_code=200 throttle.key=/spent", 1},
		{"throttle.pauses", "http.response.status_code=429 throttle.key=/down", 1},
		{"throttle.pauses", "http.response.status_code=429 throttle.key=/limited", 1},
		{"throttle.quota.remaining", "throttle.key=/limited throttle.quota.unit=requests", 95},
		{"throttle.quota.remaining", "throttle.key=/spent throttle.quota.unit=requests", 0},
		// The Transport reports a request refused by its own quota wait as
		// given up (EventGiveUp, "wait for quota failed"), so Wrap does
		// not count it again as an error.
		{"throttle.requests", "error.type=would_exceed_deadline throttle.key=/slow throttle.outcome=gave_up throttle.reason=wait for quota failed", 1},
		{"throttle.requests", "http.response.status_code=200 throttle.key=/flaky throttle.outcome=ok", 1},
		{"throttle.requests", "http.response.status_code=200 throttle.key=/limited throttle.outcome=ok", 4},
		{"throttle.requests", "http.response.status_code=200 throttle.key=/slow throttle.outcome=ok", 1},
		{"throttle.requests", "http.response.status_code=200 throttle.key=/spent throttle.outcome=ok", 1},
		{"throttle.requests", "http.response.status_code=429 throttle.key=/down throttle.outcome=gave_up throttle.reason=" + giveUpReason, 1},
		{"throttle.retries", "http.response.status_code=429 throttle.key=/limited", 1},
		{"throttle.retries", "http.response.status_code=503 throttle.key=/flaky", 1},
		{"throttle.retry.delay", "http.response.status_code=429 throttle.key=/limited", 1},
		{"throttle.retry.delay", "http.response.status_code=503 throttle.key=/flaky", 1},
		{"throttle.wait.duration", "throttle.key=/limited", 3},
	}
	if len(ps) != len(want) {
		t.Errorf("read %d series; want %d", len(ps), len(want))
	}
	for _, w := range want {
		p, ok := find(ps, w.metric, w.attrs)
		got := p.value
		if p.kind == "histogram" {
			got = float64(p.count)
		}
		if !ok || got != w.value {
			t.Errorf("%s {%s} = %v (found %v); want %v", w.metric, w.attrs, got, ok, w.value)
		}
	}

	// Durations: what the server and the limiter said, within the clock's
	// slack. A pause is exactly what was asked (MaxRetryAfter caps /down's
	// 5 s at 2 s); a wait for a 10/s bucket after a request is at most
	// 100 ms and, since the requests take well under 50 ms, at least 50 ms.
	durations := []struct {
		metric, attrs string
		lo, hi        float64 // bounds of the sum, in seconds
	}{
		{"throttle.pause.duration", "http.response.status_code=429 throttle.key=/limited", 1, 1},
		{"throttle.pause.duration", "http.response.status_code=429 throttle.key=/down", 2, 2},
		{"throttle.pause.duration", "http.response.status_code=200 throttle.key=/spent", 0.05, 0.05},
		{"throttle.retry.delay", "http.response.status_code=429 throttle.key=/limited", 1, 1},
		{"throttle.retry.delay", "http.response.status_code=503 throttle.key=/flaky", 0.0005, 0.003},
		{"throttle.wait.duration", "throttle.key=/limited", 3 * 0.05, 3 * 0.102},
	}
	for _, d := range durations {
		p, _ := find(ps, d.metric, d.attrs)
		if p.value < d.lo || p.value > d.hi {
			t.Errorf("%s {%s} sum = %.4f s; want in [%g, %g]", d.metric, d.attrs, p.value, d.lo, d.hi)
		}
	}
	for _, p := range ps {
		if p.kind == "histogram" && p.unit != "s" {
			t.Errorf("%s: unit %q; want \"s\"", p.metric, p.unit)
		}
	}
}
