package otelthrottle_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/otelthrottle"
	"go.opentelemetry.io/otel"
)

// Kinds this package does not know (added to throttle later) are counted
// by their String in throttle.events, their delay goes to
// throttle.event.delay, and they become span events; an event without a
// request (a waiter's own) is recorded too.
func TestUnknownKinds(t *testing.T) {
	reader, mp, spans, tp := newProviders(t)
	rec := &otelthrottle.Recorder{MeterProvider: mp, Keys: 10}
	ctx, span := tp.Tracer("test").Start(context.Background(), "req")
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://api.example/", nil)
	future := throttle.EventKind(1000) // what String says of a kind this version lacks
	rec.OnEvent(throttle.Event{Kind: future, Request: req, Key: "api.example", Delay: 250 * time.Millisecond, Reason: "shadow"})
	rec.OnEvent(throttle.Event{Kind: future, Key: "api.example"}) // no request, no delay
	span.End()

	ps := collect(t, reader)
	var got []string
	for _, p := range ps {
		got = append(got, p.String())
	}
	kind := future.String()
	want := []string{
		point{metric: "throttle.event.delay", unit: "s", kind: "histogram", attrs: "throttle.event=" + kind + " throttle.key=api.example", count: 1, value: 0.25, min: 0.25, max: 0.25}.String(),
		point{metric: "throttle.events", unit: "{event}", kind: "counter", attrs: "throttle.event=" + kind + " throttle.key=api.example", value: 2}.String(),
	}
	if !slices.Equal(got, want) {
		t.Errorf("read:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
	evs := spanEvents(spans.Ended()[0])
	wantEv := []string{"throttle." + kind + " attempt=0 delay=0.2 key=api.example reason=shadow"}
	if !slices.Equal(evs, wantEv) {
		t.Errorf("span events %q; want %q", evs, wantEv)
	}
}

// Attribute values are bounded: keys only as many as Keys allows (none by
// default, on metrics and span events alike), reasons at most 32.
func TestCardinality(t *testing.T) {
	for _, tc := range []struct {
		name     string
		keys     int
		wantKeys []string // throttle.key values of throttle.events, sorted
	}{
		{"default", 0, nil},
		{"two", 2, []string{"_OTHER", "k0", "k1"}},
		{"enough", 5, []string{"k0", "k1", "k2", "k3", "k4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reader, mp, spans, tp := newProviders(t)
			rec := &otelthrottle.Recorder{MeterProvider: mp, Keys: tc.keys}
			ctx, span := tp.Tracer("test").Start(context.Background(), "req")
			req, _ := http.NewRequestWithContext(ctx, "GET", "http://api.example/", nil)
			for i := range 5 {
				rec.OnEvent(throttle.Event{Kind: throttle.EventGiveUp, Request: req, Key: fmt.Sprintf("k%d", i), StatusCode: 429, Reason: fmt.Sprintf("r%d", i)})
			}
			for i := range 40 {
				rec.OnEvent(throttle.Event{Kind: throttle.EventRetry, Request: req, Key: "k0", StatusCode: 429, Reason: fmt.Sprintf("reason-%d", i)})
			}
			span.End()

			var keys []string
			reasons := map[string]bool{}
			for _, p := range collect(t, reader) {
				for kv := range strings.SplitSeq(p.attrs, " ") {
					k, v, _ := strings.Cut(kv, "=")
					switch {
					case p.metric == "throttle.events" && k == "throttle.key" && strings.Contains(p.attrs, "give-up"):
						keys = append(keys, v)
					case k == "throttle.reason":
						reasons[v] = true
					}
				}
			}
			slices.Sort(keys)
			if !slices.Equal(keys, tc.wantKeys) {
				t.Errorf("throttle.key values %q; want %q", keys, tc.wantKeys)
			}
			// 5 give-up reasons and the first 27 retry reasons, then _OTHER.
			if len(reasons) != 33 || !reasons["_OTHER"] {
				t.Errorf("%d throttle.reason values (_OTHER %v); want 33 with _OTHER", len(reasons), reasons["_OTHER"])
			}
			hasKey := false
			for _, e := range spans.Ended()[0].Events() {
				for _, kv := range e.Attributes {
					hasKey = hasKey || kv.Key == "throttle.key"
				}
			}
			if hasKey != (tc.keys > 0) {
				t.Errorf("span events carry throttle.key: %v; want %v", hasKey, tc.keys > 0)
			}
		})
	}
}

// The zero Recorder records into the global MeterProvider; a transport
// error given up on is counted with its error.type.
func TestZeroRecorder(t *testing.T) {
	reader, mp, _, _ := newProviders(t)
	prev := otel.GetMeterProvider()
	otel.SetMeterProvider(mp)
	t.Cleanup(func() { otel.SetMeterProvider(prev) })

	// A port nothing listens on: the connection is refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	var rec otelthrottle.Recorder
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	tr := &throttle.Transport{Base: base, Retry: throttle.RetryPolicy{MaxAttempts: 1}, OnEvent: rec.OnEvent}
	client := &http.Client{Transport: rec.Wrap(tr)}
	if _, err := client.Get("http://" + addr + "/"); err == nil {
		t.Fatal("GET to a closed port succeeded")
	}
	ps := collect(t, reader)
	const attrs = "error.type=connection_refused throttle.outcome=gave_up throttle.reason=MaxAttempts reached"
	if p, ok := find(ps, "throttle.requests", attrs); !ok || p.value != 1 {
		var got []string
		for _, p := range ps {
			got = append(got, p.String())
		}
		t.Errorf("throttle.requests {%s} not 1; read:\n\t%s", attrs, strings.Join(got, "\n\t"))
	}
}

// Wrap does not modify the caller's request, and what it sends carries
// the caller's context values.
func TestWrapRequest(t *testing.T) {
	_, mp, _, _ := newProviders(t)
	rec := &otelthrottle.Recorder{MeterProvider: mp}
	type ctxKey struct{}
	var sawValue bool
	rt := rec.Wrap(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sawValue = r.Context().Value(ctxKey{}) == "v"
		return httptest.NewRecorder().Result(), nil
	}))
	ctx := context.WithValue(context.Background(), ctxKey{}, "v")
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://api.example/", nil)
	before := *req
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if req.Context() != before.Context() || req.URL != before.URL || !sawValue {
		t.Errorf("request modified (context kept %v) or context value lost (saw %v)", req.Context() == before.Context(), sawValue)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
