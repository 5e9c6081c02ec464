package ratelimit

import (
	"testing"
	"time"
)

// TestRefillingBuckets checks the dialects whose reset is the time until
// a bucket is full: the policy is marked, its window told where the
// numbers allow a standard length, and a spent bucket's wait is one unit's
// refill time, not the time until it is full (issue 9: a 200 with
// remaining 0 paused the key 9.98 s when the next unit freed in 167 ms).
func TestRefillingBuckets(t *testing.T) {
	// Anthropic's resets are RFC 3339 times, against the Date.
	at := func(d time.Duration) string { return now.Add(d).UTC().Format(time.RFC3339Nano) }
	tests := []struct {
		name       string
		h          map[string]string
		wantWindow time.Duration // no: none told
		wantWait   time.Duration
		wantOK     bool
	}{
		{"OpenAI requests spent: one a second frees", map[string]string{
			"x-ratelimit-limit-requests": "60", "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "59.833s"},
			time.Minute, time.Second, true},
		{"OpenAI tokens spent: 100 a second free", map[string]string{
			"x-ratelimit-limit-tokens": "6000", "x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "59.998s"},
			time.Minute, 10 * time.Millisecond, true},
		{"a unit's time is at most the reset", map[string]string{
			"x-ratelimit-limit-requests": "60", "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "59.5s",
			"x-ratelimit-limit-tokens": "10", "x-ratelimit-remaining-tokens": "9", "x-ratelimit-reset-tokens": "6s"},
			time.Minute, time.Second, true},
		{"near full: 59.9 of 60 held says little, no window", map[string]string{
			"x-ratelimit-limit-requests": "60", "x-ratelimit-remaining-requests": "59", "x-ratelimit-reset-requests": "100ms"},
			no, 0, true},
		{"58.5 of 60 held: a minute", map[string]string{
			"x-ratelimit-limit-requests": "60", "x-ratelimit-remaining-requests": "58", "x-ratelimit-reset-requests": "1.5s"},
			time.Minute, 0, true},
		// sdktest's fake: OpenAI's headers over a fixed window of 5 a
		// second, the reset its end.
		{"a fixed window in OpenAI's headers: 4 of 5 left, end in 0.5 s", map[string]string{
			"x-ratelimit-limit-requests": "5", "x-ratelimit-remaining-requests": "4", "x-ratelimit-reset-requests": "500ms"},
			no, 0, true},
		{"a fixed window in OpenAI's headers, spent: its end is waited", map[string]string{
			"x-ratelimit-limit-requests": "5", "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "500ms"},
			no, 500 * time.Millisecond, true},
		{"a 10 s bucket is no standard length: no window, the reset is waited", map[string]string{
			"x-ratelimit-limit-requests": "100", "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "10s"},
			no, 10 * time.Second, true},
		{"full: the numbers say nothing of the rate", map[string]string{
			"x-ratelimit-limit-requests": "60", "x-ratelimit-remaining-requests": "60", "x-ratelimit-reset-requests": "0s"},
			no, 0, true},
		{"Anthropic requests spent, reset in whole seconds", map[string]string{
			"Date": nowDate, "anthropic-ratelimit-requests-limit": "50", "anthropic-ratelimit-requests-remaining": "0",
			"anthropic-ratelimit-requests-reset": at(60 * time.Second)},
			time.Minute, 1200 * time.Millisecond, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := hdr()
			for k, v := range tt.h {
				h.Set(k, v)
			}
			q := Parse(h, now)
			if len(q.Policies) == 0 {
				t.Fatalf("Parse(%v) gave no policy", h)
			}
			p := q.Policies[0]
			if !p.Refills {
				t.Errorf("Parse(%v): %+v not marked Refills", h, p)
			}
			if got := p.Window; (tt.wantWindow == no) == p.HasWindow || (p.HasWindow && got != tt.wantWindow) {
				t.Errorf("Parse(%v): window %v (%v); want %v", h, got, p.HasWindow, tt.wantWindow)
			}
			if got, ok := q.Wait(); got != tt.wantWait || ok != tt.wantOK {
				t.Errorf("Wait() = %v, %v; want %v, %v", got, ok, tt.wantWait, tt.wantOK)
			}
		})
	}
}

// TestRefillWindowNumbers checks the window's range on numbers a server
// with a 1-minute bucket sends at every fill level: whatever the rounding
// of remaining (down) and reset (to the millisecond), no other window is
// told, and the minute is told whenever two units or more are spent.
func TestRefillWindowNumbers(t *testing.T) {
	const limit, perSec = 6000, 100.0
	for held := 0.0; held < limit; held += 7.3 {
		reset := time.Duration((limit - held) / perSec * float64(time.Second)).Round(time.Millisecond)
		if reset == 0 {
			continue
		}
		p := Policy{Limit: limit, Remaining: int64(held), Reset: reset, HasLimit: true, HasRemaining: true, HasReset: true}
		w, ok := refillWindow(p, time.Millisecond)
		if (ok && w != time.Minute) || (!ok && limit-int64(held) >= 2) {
			t.Fatalf("refillWindow(%d held, reset %v) = %v, %v; want 1m0s, true", int64(held), reset, w, ok)
		}
	}
}
