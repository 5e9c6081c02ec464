package ratelimit

import (
	"strings"
	"time"
)

// OpenAI and Groq: x-ratelimit-{limit,remaining,reset}-{requests,tokens},
// resets as Go durations ("6m0s", "2m59.56s"): a policy per unit, a
// bucket that refills continuously, its reset the time until it is full.
// https://platform.openai.com/docs/guides/rate-limits
// https://console.groq.com/docs/rate-limits
// The exact keys of X-RateLimit-* are the X-RateLimit dialect's, and
// Kong's windows Kong's (it ranks before this one).
var _ = register(&dialect{
	name: "OpenAI",
	rank: rankOpenAI,
	families: []family{{prefix: "X-Ratelimit-", accept: func(rest string) bool {
		field, unit, _ := strings.Cut(rest, "-")
		return unit != "" && fieldOf(field) != 0
	}}},
	read: func(q *Reading, c *clock, v view) {
		from := len(q.Policies)
		q.readExt(v, func(e *extField, from int) {
			field, unit, _ := strings.Cut(e.rest, "-")
			q.readNumbers(c, e.vals.v, fieldOf(field), resetDuration, from, "", lowerASCII(unit))
		})
		// The resets are the time until each bucket is full: see refill.go.
		q.refills(from, time.Millisecond)
	},
})
