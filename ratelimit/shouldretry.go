package ratelimit

import "strings"

// x-should-retry, OpenAI's and Anthropic's word on a retry.
var _ = register(&dialect{
	name: "x-should-retry",
	rank: rankShouldRetry,
	keys: map[string]int{"X-Should-Retry": 0},
	read: func(r *Reading, _ *clock, v view) { r.readShouldRetry(v.vals(0)) },
})

// readShouldRetry reads x-should-retry, which OpenAI and Anthropic send to
// tell their SDKs whether a failed request may be retried: "true" or
// "false", in any case. The official SDKs obey it before looking at the
// status (openai-python and anthropic-sdk-python, _should_retry). Another
// value is ignored; when lines disagree, "false" wins: a retry the server
// refused costs more than one it would have taken.
func (q *Reading) readShouldRetry(vals []string) {
	for _, v := range vals {
		switch v = trimOWS(v); {
		case strings.EqualFold(v, "false"):
			q.ShouldRetry, q.HasShouldRetry = false, true
			return
		case strings.EqualFold(v, "true"):
			q.ShouldRetry, q.HasShouldRetry = true, true
		}
	}
}

// Permanent reports whether the response says that retrying the request
// will not help: x-should-retry: false. On a 429 it tells a spent quota
// that no wait restores (OpenAI's insufficient_quota, which its body spells
// out) from a rate limit that passes. A response that does not say is not
// permanent.
func (q Reading) Permanent() bool {
	return q.HasShouldRetry && !q.ShouldRetry
}
