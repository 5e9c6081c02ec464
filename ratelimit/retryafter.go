package ratelimit

import (
	"time"
)

// The Retry-After family: Retry-After (RFC 9110, 10.2.3) and the
// millisecond forms of Azure, Azure OpenAI, OpenAI and Anthropic.
var _ = register(&dialect{
	name: "Retry-After",
	rank: rankRetryAfter,
	keys: map[string]int{"Retry-After": 0, "Retry-After-Ms": 1, "X-Ms-Retry-After-Ms": 2},
	read: func(r *Reading, c *clock, v view) { r.readRetryAfter(c, v.vals(0), v.vals(1), v.vals(2)) },
})

// ParseRetryAfter reads one Retry-After field value: delta-seconds ("120"),
// a decimal number of seconds (Shopify sends "2.0"), or an HTTP-date in any
// of the three forms RFC 9110 §10.2.3 and §5.6.7 require a recipient to
// accept (IMF-fixdate, RFC 850, asctime).
//
// A date is measured against date, the response's own Date header, when it
// is not the zero time, else against received, the local time the response
// arrived: a client whose clock is off by minutes computes the same wait. A
// date in the past means 0.
//
// ok is false when value is not valid (empty, negative, signed, hex,
// exponent, NaN, non-ASCII digits, overflow) or when the wait would be over
// a year: an invalid Retry-After is absent, never 0.
func ParseRetryAfter(value string, date, received time.Time) (d time.Duration, ok bool) {
	now := received
	if !date.IsZero() {
		now = date
	}
	c := clock{now: now, ready: true}
	return c.retryAfter(value)
}

// retryAfter reads one Retry-After value against c.
func (c *clock) retryAfter(v string) (time.Duration, bool) {
	v = trimOWS(v)
	if whole, nano, ok := parseDecimal(v); ok {
		// RFC 9110 says delta-seconds; the epoch guess of rate-limit resets
		// does not apply: Retry-After is documented as relative.
		return seconds(whole, nano)
	}
	return c.httpDate(v)
}

// retryAfterMillis reads retry-after-ms and x-ms-retry-after-ms, the
// millisecond forms Azure, Azure OpenAI, OpenAI and Anthropic send
// (https://learn.microsoft.com/en-us/azure/ai-services/openai/how-to/quota).
func retryAfterMillis(v string) (time.Duration, bool) {
	whole, nano, ok := parseDecimal(v)
	if !ok {
		return 0, false
	}
	return millis(whole, nano)
}

// readRetryAfter fills q's Retry-After from every line of every field of
// the family. Repeated values of one precision keep the longest: the most
// conservative reading.
//
// The millisecond forms win over Retry-After when the two agree to within a
// second: Retry-After is then the same wait rounded to whole seconds (OpenAI
// and Anthropic send retry-after: 1 with retry-after-ms: 255, and their SDKs
// wait the 255 ms). When they disagree by more than rounding explains,
// neither is a rounding of the other and the longer one is kept.
func (q *Reading) readRetryAfter(c *clock, secs, ms1, ms2 []string) {
	var s, ms Reading // the seconds and the millisecond readings, apart
	for _, v := range secs {
		if d, ok := c.retryAfter(v); ok {
			s.addRetryAfter(d)
		}
	}
	for _, vs := range [2][]string{ms1, ms2} {
		for _, v := range vs {
			if d, ok := retryAfterMillis(v); ok {
				ms.addRetryAfter(d)
			}
		}
	}
	switch {
	case !ms.HasRetryAfter:
		q.RetryAfter, q.HasRetryAfter = s.RetryAfter, s.HasRetryAfter
	case !s.HasRetryAfter || (s.RetryAfter-ms.RetryAfter).Abs() < time.Second:
		q.RetryAfter, q.HasRetryAfter = ms.RetryAfter, true
	default:
		q.RetryAfter, q.HasRetryAfter = max(s.RetryAfter, ms.RetryAfter), true
	}
}

func (q *Reading) addRetryAfter(d time.Duration) {
	if !q.HasRetryAfter || d > q.RetryAfter {
		q.RetryAfter, q.HasRetryAfter = d, true
	}
}
