package otelthrottle_test

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/otelthrottle"
)

// The decisions a Transport's waiter takes by itself reach the Recorder
// through the Transport's OnEvent, and are read back: a bare 429 under the
// limit shifts the key's schedule (throttle.events and throttle.event.delay
// with throttle.event=shift) and trims its pace by 1% (a slow-down), ten of
// them trim it by 10%, the eleventh cuts it (throttle.slowdowns,
// throttle.pace at the cut's 7/s), which is back at the limit, 10/s, 2 s
// later; a server's declared limit sets throttle.pace, its window is
// counted. Run in a synctest bubble, so the values are exact.
func TestWaiterDecisions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reader, mp, spans, tp := newProviders(t)
		rec := &otelthrottle.Recorder{MeterProvider: mp, Keys: 10}
		bare := 0
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp := &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("ok")), Request: r}
			switch r.URL.Path {
			case "/bare":
				// Twelve: the first anchors the key, one unit deep (its
				// pace kept), ten trim, the last cuts.
				if bare++; bare <= 12 {
					resp.StatusCode = 429 // nothing said of when to come back
				}
			case "/declared":
				resp.Header.Set("RateLimit-Policy", `"d";q=100;w=10`)
				resp.Header.Set("RateLimit", `"d";r=60;t=5`)
			}
			return resp, nil
		})
		tr := &throttle.Transport{
			Base:    base,
			Waiter:  &throttle.Limiter{Overrides: map[string][]throttle.Limit{"/bare": {{Rate: 10, Burst: 1}}}},
			Key:     func(r *http.Request) string { return r.URL.Path },
			Retry:   throttle.RetryPolicy{InitialInterval: time.Millisecond, MaxInterval: time.Millisecond, MaxAttempts: 13, Budget: -1},
			OnEvent: rec.OnEvent,
		}
		client := &http.Client{Transport: rec.Wrap(tr)}
		tracer := tp.Tracer("test")
		for _, path := range []string{"/bare", "/declared"} {
			ctx, span := tracer.Start(context.Background(), path)
			req, _ := http.NewRequestWithContext(ctx, "GET", "http://api.example"+path, nil)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("GET %s: %v", path, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			span.End()
		}
		if p, ok := find(collect(t, reader), "throttle.pace", "throttle.key=/bare"); !ok || p.value != 7 {
			t.Errorf("throttle.pace of /bare during the cut: %v (found %v); want 7", p.value, ok)
		}
		time.Sleep(3 * time.Second) // the cut regrows over 2 s

		var got []string
		for _, p := range collect(t, reader) {
			switch p.metric {
			case "throttle.slowdowns", "throttle.pace":
			case "throttle.events", "throttle.event.delay":
				if !strings.Contains(p.attrs, "shift") && !strings.Contains(p.attrs, "slow-down") &&
					!strings.Contains(p.attrs, "recovered") && !strings.Contains(p.attrs, "declared") &&
					!strings.Contains(p.attrs, "window") {
					continue
				}
			default:
				continue
			}
			got = append(got, p.String())
		}
		want := []string{
			point{metric: "throttle.event.delay", unit: "s", kind: "histogram", attrs: "throttle.event=shift throttle.key=/bare", count: 10, value: 1.07, min: 0.102, max: 0.112}.String(),
			point{metric: "throttle.event.delay", unit: "s", kind: "histogram", attrs: "throttle.event=window throttle.key=/declared", count: 1, value: 5, min: 5, max: 5}.String(),
			point{metric: "throttle.events", unit: "{event}", kind: "counter", attrs: "throttle.event=declared throttle.key=/declared", value: 1}.String(),
			point{metric: "throttle.events", unit: "{event}", kind: "counter", attrs: "throttle.event=recovered throttle.key=/bare", value: 1}.String(),
			point{metric: "throttle.events", unit: "{event}", kind: "counter", attrs: "throttle.event=shift throttle.key=/bare", value: 10}.String(),
			point{metric: "throttle.events", unit: "{event}", kind: "counter", attrs: "throttle.event=slow-down throttle.key=/bare", value: 11}.String(),
			point{metric: "throttle.events", unit: "{event}", kind: "counter", attrs: "throttle.event=window throttle.key=/declared", value: 1}.String(),
			point{metric: "throttle.pace", unit: "{unit}/s", kind: "gauge", attrs: "throttle.key=/bare", value: 10}.String(),
			point{metric: "throttle.pace", unit: "{unit}/s", kind: "gauge", attrs: "throttle.key=/declared", value: 10}.String(),
			point{metric: "throttle.slowdowns", unit: "{slowdown}", kind: "counter", attrs: "throttle.key=/bare", value: 11}.String(),
		}
		if !slices.Equal(got, want) {
			t.Errorf("read:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
		}
		t.Logf("readout:\n\t%s", strings.Join(got, "\n\t"))

		// The decisions a request caused are events on its span; the
		// recovery, which no request caused, is on none.
		var evs []string
		for _, s := range spans.Ended() {
			for _, e := range spanEvents(s) {
				evs = append(evs, s.Name()+" "+e)
			}
		}
		for _, w := range []string{
			"/bare throttle.shift attempt=2 delay=0.1 key=/bare",
			"/bare throttle.slow-down attempt=2 delay=0.0 key=/bare rate=9.9",
			"/bare throttle.slow-down attempt=12 delay=0.0 key=/bare rate=7",
			"/declared throttle.declared attempt=1 burst=100 delay=0.0 key=/declared rate=10",
			"/declared throttle.window attempt=1 delay=5.0 key=/declared remaining=60",
		} {
			if !slices.Contains(evs, w) {
				t.Errorf("span events\n\t%s\nwant %q among them", strings.Join(evs, "\n\t"), w)
			}
		}
		if slices.ContainsFunc(evs, func(s string) bool { return strings.HasSuffix(s, "recovered") }) {
			t.Errorf("span events %q; want no recovery", evs)
		}
	})
}
