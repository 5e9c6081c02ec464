package measure

import (
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/throttletest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestRun drives a token bucket of 10/s, burst 1, from 2 workers without
// pacing, so every answer's time and status are known: the run must count
// them exactly.
func TestRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := throttletest.NewTokenBucket(10, 1)
		c := &http.Client{Transport: &throttletest.Direct{Handler: s, Latency: 50 * time.Millisecond}}
		res := Run(t.Context(), Load{Client: c, URL: "http://api.test/", Workers: 2, Requests: 6})
		// Both workers arrive together every 100 ms: one admitted, one refused.
		if res.Sent != 6 || res.OK != 3 || res.GaveUp != 3 || res.Errors != 0 {
			t.Errorf("sent %d ok %d gave up %d errors %d; want 6, 3, 3, 0", res.Sent, res.OK, res.GaveUp, res.Errors)
		}
		if res.Wall != 300*time.Millisecond {
			t.Errorf("wall %v; want 300ms (three rounds of 100 ms)", res.Wall)
		}
		if got := res.Quantile(0.99); got != 100*time.Millisecond {
			t.Errorf("p99 %v; want 100ms", got)
		}
		if st := s.Stats(); st.Admitted != res.OK {
			t.Errorf("server admitted %d; client saw %d successes", st.Admitted, res.OK)
		}
	})
}

// TestRunFor checks the time bound: no request starts after For.
func TestRunFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &http.Client{Transport: &throttletest.Direct{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), Latency: 100 * time.Millisecond}}
		res := Run(t.Context(), Load{Client: c, URL: "http://api.test/", Workers: 3, For: time.Second})
		if res.Sent != 15 || res.OK != 15 { // 5 rounds of 200 ms, 3 workers
			t.Errorf("sent %d ok %d; want 15, 15", res.Sent, res.OK)
		}
	})
}

func TestQuantileMedian(t *testing.T) {
	r := Result{Latencies: []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}
	for _, tt := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 5}, {0.9, 9}, {0.99, 10}, {1, 10}, {0, 1}} {
		if got := r.Quantile(tt.q); got != tt.want {
			t.Errorf("Quantile(%v) = %v; want %v", tt.q, got, tt.want)
		}
	}
	if (Result{}).Quantile(0.99) != 0 {
		t.Errorf("Quantile of nothing; want 0")
	}
	m := Median([]Row{
		{Name: "a", Capacity: 0.9, P99: 3, RejectsPerOK: 0.3},
		{Name: "b", Capacity: 0.5, P99: 1, RejectsPerOK: 0.2},
		{Name: "c", Capacity: 0.7, P99: 2, RejectsPerOK: 0.1},
	})
	if m.Name != "c" || m.Capacity != 0.7 || m.P99 != 2 || m.RejectsPerOK != 0.2 {
		t.Errorf("Median = %+v; want c's name, 0.7, p99 2, 0.2 (column by column)", m)
	}
}

func TestEvents(t *testing.T) {
	var e Events
	e.Record(throttle.Event{Kind: throttle.EventRetry})
	e.Record(throttle.Event{Kind: throttle.EventGiveUp, Reason: "retry budget spent"})
	e.Record(throttle.Event{Kind: throttle.EventRetry})
	if got, want := e.String(), "give-up 1, retry 2; gave up: retry budget spent 1"; got != want {
		t.Errorf("String() = %q; want %q", got, want)
	}
	if !strings.Contains(Table([]Row{{Name: "x", Events: e.String()}}), "retry budget spent 1") {
		t.Errorf("Table leaves out the events")
	}
}
