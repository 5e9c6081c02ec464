package otelthrottle_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/throttle-go/throttle/otelthrottle"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// TestSpanEvents runs the scenario and checks the events added to each
// request's span.
func TestSpanEvents(t *testing.T) {
	_, mp, spans, tp := newProviders(t)
	rec := &otelthrottle.Recorder{MeterProvider: mp, Keys: 10}
	run(t, rec, tp)

	got := map[string][]string{}
	for _, s := range spans.Ended() {
		got[s.Name()] = spanEvents(s)
	}
	const reason = "server asked to wait longer than MaxRetryAfter"
	want := map[string][]string{
		"/limited#1": {
			"throttle.pause attempt=1 delay=1.0 http.response.status_code=429 key=/limited",
			"throttle.retry attempt=1 delay=1.0 http.response.status_code=429 key=/limited",
		},
		"/limited#2": {"throttle.wait attempt=1 delay=0.1 key=/limited"},
		"/limited#3": {"throttle.wait attempt=1 delay=0.1 key=/limited"},
		"/limited#4": {"throttle.wait attempt=1 delay=0.1 key=/limited"},
		"/flaky#1":   {"throttle.retry attempt=1 delay=0.0 http.response.status_code=503 key=/flaky"},
		"/down#1": {
			"throttle.pause attempt=1 delay=2.0 http.response.status_code=429 key=/down",
			"throttle.give-up attempt=1 delay=5.0 http.response.status_code=429 key=/down reason=" + reason,
		},
		"/spent#1": {"throttle.pause attempt=1 delay=0.1 http.response.status_code=200 key=/spent"},
		"/slow#1":  nil,
		"/slow#2":  {"throttle.give-up attempt=1 delay=0.0 error.type=would_exceed_deadline key=/slow reason=wait for quota failed"},
	}
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("span %s not recorded", name)
			continue
		}
		if !slices.Equal(g, w) {
			t.Errorf("span %s events:\n\t%s\nwant:\n\t%s", name, strings.Join(g, "\n\t"), strings.Join(w, "\n\t"))
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d spans recorded; want %d", len(got), len(want))
	}
}

// spanEvents writes s's events as "name k=v …", the throttle. prefix of
// attribute keys dropped and throttle.delay rounded to 0.1 s.
func spanEvents(s sdktrace.ReadOnlySpan) []string {
	var evs []string
	for _, e := range s.Events() {
		var parts []string
		parts = append(parts, e.Name)
		for _, kv := range e.Attributes {
			k := strings.TrimPrefix(string(kv.Key), "throttle.")
			v := kv.Value.Emit()
			if k == "delay" {
				v = fmt.Sprintf("%.1f", kv.Value.AsFloat64())
			}
			parts = append(parts, k+"="+v)
		}
		slices.Sort(parts[1:])
		evs = append(evs, strings.Join(parts, " "))
	}
	return evs
}
