package learn

import (
	"net/http"
	"testing"
	"time"

	"github.com/throttle-go/throttle/ratelimit"
)

// TestDeepBucket: a policy said to hold more than its limit (tollbooth:
// RateLimit-Limit 7, RateLimit-Remaining 13 of a burst of 14) is a bucket
// of at least what it held before the request (13 + the request's 1),
// from then on: a later response of a drained bucket (3 left) still reads
// as that bucket, with the window its resets tell.
func TestDeepBucket(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	read := func(l *Keys, remaining string, at time.Duration) ratelimit.Policy {
		h := http.Header{}
		h.Set("RateLimit-Limit", "7")
		h.Set("RateLimit-Remaining", remaining)
		h.Set("RateLimit-Reset", "1")
		q := l.Read("k", ratelimit.Parse(h, t0.Add(at)), "requests", 1, false, t0.Add(at))
		return q.Policies[0]
	}
	var l Keys
	p := read(&l, "13", 0)
	if !p.Refills || p.Depth != 14 || !p.HasWindow || p.Window != time.Second {
		t.Fatalf("first response: Refills %v, Depth %d, window %v (%v); want true, 14, 1s", p.Refills, p.Depth, p.Window, p.HasWindow)
	}
	p = read(&l, "3", 500*time.Millisecond)
	if !p.Refills || p.Depth != 14 {
		t.Errorf("drained: Refills %v, Depth %d; want true, 14 (learned)", p.Refills, p.Depth)
	}
	var fresh Keys
	if p := read(&fresh, "3", 0); p.Refills || p.Depth != 0 {
		t.Errorf("a key never seen deeper: Refills %v, Depth %d; want false, 0", p.Refills, p.Depth)
	}
}
