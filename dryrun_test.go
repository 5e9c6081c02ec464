package throttle

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"
)

// TestTransportDryRun checks that a dry run sends every request at once
// and reports the waits, pauses and retries it would have imposed.
func TestTransportDryRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(status(200), status(200), status(429, "Retry-After", "2"), status(200))
		var ev events
		tr := &Transport{Base: s, Waiter: &Limiter{Limits: []Limit{{Rate: 1, Burst: 1}}}, DryRun: true, OnEvent: ev.add}
		var codes []int
		for range 4 {
			resp, err := get(t, tr)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			codes = append(codes, resp.StatusCode)
		}
		if want := []int{200, 200, 429, 200}; !slices.Equal(codes, want) {
			t.Errorf("statuses %v; want %v, the 429 returned", codes, want)
		}
		if want := []time.Duration{0, 0, 0, 0}; !slices.Equal(s.arrivals, want) {
			t.Errorf("sent at %v; want %v, nothing delayed", s.arrivals, want)
		}
		var got []string
		for _, e := range ev.all {
			// To the µs: the trimmed pace is a float.
			got = append(got, e.Kind.String()+" "+e.Delay.Round(time.Microsecond).String())
		}
		want := []string{
			"would-wait 1s", // the second request: the first took the turn at 0
			"would-wait 1s", // nothing reserved for the second: the same delay
			"slow-down 0s",  // the 429 under a known limit trims the pace
			"pause 2s", "would-retry 2s",
			"would-wait 2s", // the pause
		}
		if !slices.Equal(got, want) {
			t.Errorf("events %q; want %q", got, want)
		}
	})
}

// TestTransportDryRunRateLimiter checks a waiter that cannot tell its
// delay without waiting: the would-wait has no delay, and the waiter's
// error.
func TestTransportDryRunRateLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(status(200))
		var ev events
		tr := &Transport{Base: s, Waiter: rate.NewLimiter(1, 1), DryRun: true, OnEvent: ev.add}
		for range 2 {
			resp, err := get(t, tr)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		w := ev.of(EventWouldWait)
		if len(w) != 1 || w[0].Delay != 0 || w[0].Err == nil || len(s.arrivals) != 2 {
			t.Errorf("would-wait events %+v, %d sent; want one with an error, 2 sent", w, len(s.arrivals))
		}
	})
}

// TestTransportDryRunDeadline checks that a dry run fails no request for
// its deadline, and reports the wait it would have refused.
func TestTransportDryRunDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(status(200))
		var ev events
		tr := &Transport{Base: s, Waiter: &Limiter{Limits: []Limit{{Rate: 1, Burst: 1}}}, DryRun: true, OnEvent: ev.add}
		for range 2 {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
			req, _ := http.NewRequestWithContext(ctx, "GET", "http://api.example/x", nil)
			resp, err := tr.RoundTrip(req)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		if w := ev.of(EventWouldWait); len(w) != 1 || w[0].Delay != time.Second {
			t.Errorf("would-wait events %+v; want one of 1s", w)
		}
	})
}

// TestTransportDryRunUnits: a dry run asks for a request's cost in every
// unit (Transport.CostOf's Units), not its requests alone: with 100 tokens a
// second (burst 100) and 60 tokens a request, the second request would
// wait 200 ms for its tokens though the requests' bucket lets it go.
func TestTransportDryRunUnits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(status(200), status(200))
		var ev events
		tr := &Transport{
			Base: s,
			Waiter: &Limiter{Limits: []Limit{
				{Rate: 100, Burst: 10},
				{Unit: "tokens", Rate: 100, Burst: 100},
			}},
			CostOf:  func(*http.Request) Cost { return Cost{N: 1, Units: map[string]int{"tokens": 60}} },
			DryRun:  true,
			OnEvent: ev.add,
		}
		for range 2 {
			resp, err := get(t, tr)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		var got []string
		for _, e := range ev.all {
			got = append(got, e.Kind.String()+" "+e.Delay.Round(time.Millisecond).String())
		}
		if want := []string{"would-wait 200ms"}; !slices.Equal(got, want) {
			t.Errorf("events %q; want %q (the second request's 60 tokens: 20 left, 40 more at 100/s)", got, want)
		}
		if want := []time.Duration{0, 0}; !slices.Equal(s.arrivals, want) {
			t.Errorf("sent at %v; want %v, nothing delayed", s.arrivals, want)
		}
	})
}
