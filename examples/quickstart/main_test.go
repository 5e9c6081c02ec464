package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestQuickstart runs both phases small and fast against the real loopback
// server: the bare client collects 429s, the throttled one none, at the
// limit's rate. Real clocks: the API's burst of 10 at 50/s leaves 200 ms of
// slack for scheduling jitter, far more than loopback needs.
func TestQuickstart(t *testing.T) {
	const n, c, limit, burst = 150, 32, 50.0, 10 // the demo's defaults, fewer requests
	ctx := context.Background()

	bare := run(ctx, "bare", n, c, limit, burst, func(base http.RoundTripper, _ *tally) http.RoundTripper { return base })
	if bare.client.limited.Load() == 0 || bare.refused != bare.client.limited.Load() {
		t.Errorf("bare: client saw %d 429s, server sent %d; want some, and equal", bare.client.limited.Load(), bare.refused)
	}

	throttled := run(ctx, "throttled", n, c, limit, burst, func(base http.RoundTripper, tl *tally) http.RoundTripper {
		return withThrottle(base, limit, tl)
	})
	if got := throttled.client.ok.Load(); got != n {
		t.Errorf("throttled: %d of %d requests got 2xx", got, n)
	}
	if throttled.refused != 0 || throttled.client.retries.Load() != 0 {
		t.Errorf("throttled: the server sent %d 429s, the client retried %d times; want 0, 0", throttled.refused, throttled.client.retries.Load())
	}
	// Never faster than the limit: n-1 intervals after the first request.
	if min := time.Duration(float64(n-1) / limit * float64(time.Second)); throttled.wall < min {
		t.Errorf("throttled: %d requests took %v; the limit allows no less than %v", n, throttled.wall, min)
	}
	// Not much slower: 150 requests take 2.98 s at the limit; a single
	// needless 1 s pause (a Retry-After, a spent "window" misread) takes
	// the rate under 0.8 of the limit, scheduling jitter under -race does
	// not (it delays a turn, and the next ones keep their times).
	if got := float64(throttled.arrivals) / throttled.wall.Seconds(); got < 0.8*limit {
		t.Errorf("throttled: %.1f requests/s; want about %v", got, limit)
	}
}
