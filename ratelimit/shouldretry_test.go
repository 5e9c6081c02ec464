package ratelimit

import "testing"

// TestParseShouldRetry reads x-should-retry as the OpenAI and
// Anthropic SDKs do (openai-python _should_retry: "true" retries, "false"
// does not, whatever the status).
func TestParseShouldRetry(t *testing.T) {
	tests := []struct {
		name          string
		lines         []string // nil: no x-should-retry
		want, wantHas bool
		wantPermanent bool
	}{
		{"absent", nil, false, false, false},
		{"true", []string{"true"}, true, true, false},
		{"false", []string{"false"}, false, true, true},
		{"any case, white space", []string{" FALSE\t"}, false, true, true},
		{"garbage is absent", []string{"maybe"}, false, false, false},
		{"empty is absent", []string{""}, false, false, false},
		{"false wins over true", []string{"true", "false"}, false, true, true},
		{"false wins over true, in either order", []string{"false", "true"}, false, true, true},
		{"garbage beside true", []string{"1", "true"}, true, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := hdr("Retry-After", "1")
			for _, v := range tt.lines {
				h.Add("x-should-retry", v)
			}
			q := Parse(h, now)
			if q.ShouldRetry != tt.want || q.HasShouldRetry != tt.wantHas {
				t.Errorf("Parse(x-should-retry: %q) ShouldRetry = %v, %v; want %v, %v", tt.lines, q.ShouldRetry, q.HasShouldRetry, tt.want, tt.wantHas)
			}
			if got := q.Permanent(); got != tt.wantPermanent {
				t.Errorf("Parse(x-should-retry: %q).Permanent() = %v; want %v", tt.lines, got, tt.wantPermanent)
			}
			checkReading(t, q)
		})
	}
}
