package throttle

import (
	"context"
	"net/http"
	"testing"
	"time"
)

// BenchmarkAdaptEvents measures what listening for a waiter's decisions
// costs a response's Observe: a typical response (a window counted down,
// the same window each time) on a key, with no one listening (the anchor)
// and with a Limiter.OnEvent, alternated in one loop so both see the same
// machine. "ratio" is the listened Observe's time over the anchor's.
func BenchmarkAdaptEvents(b *testing.B) {
	quiet := (&Limiter{}).For("k")
	heard := (&Limiter{OnEvent: func(Event) {}}).For("k")
	ctx := context.Background()
	f := Feedback{Window: &ServerWindow{Remaining: 1e9, Reset: time.Hour, Size: 2e9, Length: 2 * time.Hour}}
	const per = 100
	var tq, th time.Duration
	b.ReportAllocs()
	run := func(a Quota) time.Duration {
		start := time.Now()
		for range per {
			a.Observe(ctx, f)
		}
		return time.Since(start)
	}
	odd := false
	for b.Loop() {
		// Each first in turn, so that neither gains from going second.
		if odd = !odd; odd {
			tq += run(quiet)
			th += run(heard)
		} else {
			th += run(heard)
			tq += run(quiet)
		}
	}
	b.ReportMetric(float64(tq.Nanoseconds())/float64(b.N*per), "ns/adapt-anchor")
	b.ReportMetric(float64(th.Nanoseconds())/float64(b.N*per), "ns/adapt-listened")
	b.ReportMetric(float64(th)/float64(tq), "ratio")
}

// BenchmarkTransportEvents measures what an OnEvent costs a request
// through a Transport with an unlimited Limiter, on a Base that answers
// 200 at once (the context a Transport builds for each attempt's waiter
// calls, and the listening Observe): without OnEvent (the anchor) and with
// one, alternated in one loop. "ratio" is the time with OnEvent over the
// anchor's.
func BenchmarkTransportEvents(b *testing.B) {
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return respond(r, 200), nil
	})
	quiet := &Transport{Base: base, Waiter: &Limiter{}}
	heard := &Transport{Base: base, Waiter: &Limiter{}, OnEvent: func(Event) {}}
	req, _ := http.NewRequest("GET", "http://api.example/x", nil)
	send := func(t *Transport) {
		resp, err := t.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
	}
	const per = 100
	var tq, th time.Duration
	b.ReportAllocs()
	run := func(t *Transport) time.Duration {
		start := time.Now()
		for range per {
			send(t)
		}
		return time.Since(start)
	}
	odd := false
	for b.Loop() {
		if odd = !odd; odd {
			tq += run(quiet)
			th += run(heard)
		} else {
			th += run(heard)
			tq += run(quiet)
		}
	}
	b.ReportMetric(float64(tq.Nanoseconds())/float64(b.N*per), "ns/req-anchor")
	b.ReportMetric(float64(th.Nanoseconds())/float64(b.N*per), "ns/req-onevent")
	b.ReportMetric(float64(th)/float64(tq), "ratio")
}
