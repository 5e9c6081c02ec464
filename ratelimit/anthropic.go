package ratelimit

import (
	"strings"
	"time"
)

// Anthropic: anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-
// {limit,remaining,reset}, resets in RFC 3339: a policy per unit, a
// bucket that refills continuously, its reset when it is full again.
// https://docs.anthropic.com/en/api/rate-limits
var _ = register(&dialect{
	name:     "Anthropic",
	rank:     rankAnthropic,
	families: []family{{prefix: "Anthropic-Ratelimit-"}},
	read: func(q *Reading, c *clock, v view) {
		from := len(q.Policies)
		q.readExt(v, func(e *extField, from int) {
			if i := strings.LastIndexByte(e.rest, '-'); i > 0 {
				q.readNumbers(c, e.vals.v, fieldOf(e.rest[i+1:]), resetRFC3339, from, "", lowerASCII(e.rest[:i]))
			}
		})
		// The resets are when each bucket is "fully replenished", and
		// come in whole seconds: see refill.go.
		q.refills(from, time.Second)
	},
})
