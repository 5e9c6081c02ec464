package ratelimit

import (
	"testing"
	"time"
)

func TestParseDecimal(t *testing.T) {
	tests := []struct {
		name       string
		in         string
		whole, nan int64
		ok         bool
	}{
		{"integer", "42", 42, 0, true},
		{"zero", "0", 0, 0, true},
		{"fraction", "1.234", 1, 234_000_000, true},
		{"float remaining (Reddit)", "598.0", 598, 0, true},
		{"float epoch (Discord)", "1470173023.123", 1470173023, 123_000_000, true},
		{"fraction past nanoseconds is dropped", "0.0000000019", 0, 1, true},
		{"white space", "\t 7 ", 7, 0, true},
		{"max int64", "9223372036854775807", 1<<63 - 1, 0, true},
		{"overflow", "9223372036854775808", 0, 0, false},
		{"empty", "", 0, 0, false},
		{"blank", "  ", 0, 0, false},
		{"negative", "-1", 0, 0, false},
		{"plus", "+30", 0, 0, false},
		{"hex", "0x1E", 0, 0, false},
		{"exponent", "1e30", 0, 0, false},
		{"NaN", "NaN", 0, 0, false},
		{"Inf", "Inf", 0, 0, false},
		{"fullwidth digits", "３０", 0, 0, false},
		{"Arabic-Indic digits", "٣٠", 0, 0, false},
		{"leading dot", ".5", 0, 0, false},
		{"trailing dot", "5.", 0, 0, false},
		{"two dots", "1.2.3", 0, 0, false},
		{"inner space", "1 0", 0, 0, false},
		{"underscore", "1_000", 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			whole, nano, ok := parseDecimal(tt.in)
			if whole != tt.whole || nano != tt.nan || ok != tt.ok {
				t.Errorf("parseDecimal(%q) = %d, %d, %v; want %d, %d, %v", tt.in, whole, nano, ok, tt.whole, tt.nan, tt.ok)
			}
		})
	}
}

func TestClockReset(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		kind   resetKind
		want   time.Duration
		wantOK bool
	}{
		{"delta seconds", "30", resetAuto, 30 * time.Second, true},
		{"delta float seconds", "1.5", resetAuto, 1500 * time.Millisecond, true},
		{"epoch seconds", "1748235664", resetAuto, time.Minute, true},
		{"epoch float seconds", "1748235604.25", resetAuto, 250 * time.Millisecond, true},
		{"epoch milliseconds", "1748235604500", resetAuto, 500 * time.Millisecond, true},
		{"epoch in the past", "1748235000", resetAuto, 0, true},
		{"RFC 3339", "2025-05-26T05:01:04Z", resetAuto, time.Minute, true},
		{"RFC 3339 with offset", "2025-05-26T07:01:04+02:00", resetAuto, time.Minute, true},
		{"RFC 3339 fraction", "2025-05-26T05:00:04.75Z", resetRFC3339, 750 * time.Millisecond, true},
		{"ISO 8601 without seconds", "2025-05-26T05:01Z", resetAuto, 56 * time.Second, true},
		{"HTTP-date", "Mon, 26 May 2025 05:01:04 GMT", resetAuto, time.Minute, true},
		{"HTTP-date is not RFC 3339", "Mon, 26 May 2025 05:01:04 GMT", resetRFC3339, 0, false},
		{"Go duration", "6m0s", resetDuration, 6 * time.Minute, true},
		{"Go duration ms", "12ms", resetDuration, 12 * time.Millisecond, true},
		{"Go duration compound", "2m59.56s", resetDuration, 2*time.Minute + 59560*time.Millisecond, true},
		{"Go duration hours", "1h2m3s", resetDuration, time.Hour + 2*time.Minute + 3*time.Second, true},
		{"Go duration seconds as a number", "7", resetDuration, 7 * time.Second, true},
		{"Go duration is not auto", "6m0s", resetAuto, 0, false},
		{"Go duration negative", "-1s", resetDuration, 0, false},
		{"Go duration plus", "+1s", resetDuration, 0, false},
		{"Go duration leading dot", ".5s", resetDuration, 0, false},
		{"Go duration no unit", "1.5.5", resetDuration, 0, false},
		{"Go duration over a year", "8761h", resetDuration, 0, false},
		{"Go duration overflow", "9999999999999h", resetDuration, 0, false},
		{"empty", "", resetAuto, 0, false},
		{"garbage", "later", resetAuto, 0, false},
		{"RFC 3339 garbage", "2025-05-26Tnonsense", resetRFC3339, 0, false},
		{"epoch over a year ahead", "1800000000", resetAuto, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &clock{date: []string{nowDate}}
			got, ok := c.reset(tt.in, tt.kind)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("reset(%q, %d) = %v, %v; want %v, %v", tt.in, tt.kind, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}
