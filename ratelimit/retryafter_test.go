package ratelimit

import (
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	// RFC 9110 §5.6.7's example instant, in its three forms.
	date := time.Date(1994, 11, 6, 8, 49, 7, 0, time.UTC) // 30 s before the example
	tests := []struct {
		name     string
		value    string
		date     time.Time // the response's Date; zero when absent
		received time.Time
		want     time.Duration
		wantOK   bool
	}{
		{"delta seconds", "120", time.Time{}, date, 120 * time.Second, true},
		{"zero", "0", time.Time{}, date, 0, true},
		{"optional white space", " \t5 ", time.Time{}, date, 5 * time.Second, true},
		// Shopify: "Retry-After: 2.0"
		// https://shopify.dev/docs/api/admin-rest/usage/rate-limits
		{"decimal (Shopify)", "2.0", time.Time{}, date, 2 * time.Second, true},
		{"decimal fraction", "1.25", time.Time{}, date, 1250 * time.Millisecond, true},
		{"IMF-fixdate", "Sun, 06 Nov 1994 08:49:37 GMT", date, date, 30 * time.Second, true},
		{"RFC 850", "Sunday, 06-Nov-94 08:49:37 GMT", date, date, 30 * time.Second, true},
		{"asctime", "Sun Nov  6 08:49:37 1994", date, date, 30 * time.Second, true},
		{"Date 30 s ahead of the local clock: same wait", "Sun, 06 Nov 1994 08:49:37 GMT", date, date.Add(-30 * time.Second), 30 * time.Second, true},
		{"Date 30 s behind the local clock: same wait", "Sun, 06 Nov 1994 08:49:37 GMT", date, date.Add(30 * time.Second), 30 * time.Second, true},
		{"no Date: the receive time", "Sun, 06 Nov 1994 08:49:37 GMT", time.Time{}, date.Add(10 * time.Second), 20 * time.Second, true},
		{"date in the past is 0", "Sun, 06 Nov 1994 08:49:00 GMT", date, date, 0, true},
		{"over a year is absent", "31536001", time.Time{}, date, 0, false},
		{"date over a year ahead is absent", "Mon, 06 Nov 1995 08:49:37 GMT", date, date, 0, false},
		{"empty", "", time.Time{}, date, 0, false},
		{"negative", "-1", time.Time{}, date, 0, false},
		{"plus sign", "+30", time.Time{}, date, 0, false},
		{"hex", "0x1E", time.Time{}, date, 0, false},
		{"exponent", "1e30", time.Time{}, date, 0, false},
		{"NaN", "NaN", time.Time{}, date, 0, false},
		{"fullwidth digits", "３０", time.Time{}, date, 0, false},
		{"overflow", "99999999999999999999", time.Time{}, date, 0, false},
		{"trailing dot", "5.", time.Time{}, date, 0, false},
		{"leading dot", ".5", time.Time{}, date, 0, false},
		{"unit", "5s", time.Time{}, date, 0, false},
		{"garbage", "soon", time.Time{}, date, 0, false},
		{"list", "5, 10", time.Time{}, date, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseRetryAfter(tt.value, tt.date, tt.received)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tt.value, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestParseRetryAfterFamily(t *testing.T) {
	runCases(t, []readingCase{
		{name: "Retry-After measured against Date, local clock 30 s behind",
			h:        hdr("Date", nowDate, "Retry-After", "Mon, 26 May 2025 05:01:04 GMT"),
			received: now.Add(-30 * time.Second),
			want:     Reading{RetryAfter: time.Minute, HasRetryAfter: true}},
		{name: "Retry-After measured against Date, local clock 30 s ahead",
			h:        hdr("Date", nowDate, "Retry-After", "Mon, 26 May 2025 05:01:04 GMT"),
			received: now.Add(30 * time.Second),
			want:     Reading{RetryAfter: time.Minute, HasRetryAfter: true}},
		// Azure OpenAI sends retry-after-ms and x-ms-retry-after-ms.
		// https://learn.microsoft.com/en-us/azure/ai-services/openai/how-to/quota
		{name: "retry-after-ms", h: hdr("Retry-After-Ms", "1500"),
			want: Reading{RetryAfter: 1500 * time.Millisecond, HasRetryAfter: true}},
		{name: "x-ms-retry-after-ms", h: hdr("X-Ms-Retry-After-Ms", "250"),
			want: Reading{RetryAfter: 250 * time.Millisecond, HasRetryAfter: true}},
		{name: "the family keeps its longest", h: hdr("Retry-After", "1", "Retry-After-Ms", "1500", "X-Ms-Retry-After-Ms", "900"),
			want: Reading{RetryAfter: 1500 * time.Millisecond, HasRetryAfter: true}},
		{name: "an invalid member is ignored", h: hdr("Retry-After", "-5", "Retry-After-Ms", "750"),
			want: Reading{RetryAfter: 750 * time.Millisecond, HasRetryAfter: true}},
		{name: "ms over a year is absent", h: hdr("Retry-After-Ms", "31536000001")},
	})
}

// TestParseRetryAfterMillisPreferred checks that retry-after-ms wins
// over a Retry-After that is its rounding, as the OpenAI and Anthropic SDKs
// read them (openai-python _parse_retry_after_header reads retry-after-ms
// first).
func TestParseRetryAfterMillisPreferred(t *testing.T) {
	runCases(t, []readingCase{
		{name: "OpenAI: retry-after 1, retry-after-ms 255", h: hdr("retry-after", "1", "retry-after-ms", "255"),
			want: Reading{RetryAfter: 255 * time.Millisecond, HasRetryAfter: true}},
		{name: "rounded down: retry-after 0, retry-after-ms 500", h: hdr("retry-after", "0", "retry-after-ms", "500"),
			want: Reading{RetryAfter: 500 * time.Millisecond, HasRetryAfter: true}},
		{name: "Azure: x-ms-retry-after-ms with retry-after", h: hdr("Retry-After", "3", "X-Ms-Retry-After-Ms", "2100"),
			want: Reading{RetryAfter: 2100 * time.Millisecond, HasRetryAfter: true}},
		{name: "disagreeing beyond rounding: the longer, Retry-After", h: hdr("retry-after", "60", "retry-after-ms", "255"),
			want: Reading{RetryAfter: time.Minute, HasRetryAfter: true}},
		{name: "disagreeing beyond rounding: the longer, milliseconds", h: hdr("retry-after", "1", "retry-after-ms", "5000"),
			want: Reading{RetryAfter: 5 * time.Second, HasRetryAfter: true}},
		{name: "an invalid retry-after-ms leaves Retry-After", h: hdr("retry-after", "2", "retry-after-ms", "soon"),
			want: Reading{RetryAfter: 2 * time.Second, HasRetryAfter: true}},
	})
}
