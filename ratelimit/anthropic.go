package ratelimit

import (
	"strings"
)

// Anthropic: anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-
// {limit,remaining,reset}, resets in RFC 3339: a policy per unit.
// https://docs.anthropic.com/en/api/rate-limits
var _ = register(&dialect{
	name:     "Anthropic",
	rank:     rankAnthropic,
	families: []family{{prefix: "Anthropic-Ratelimit-"}},
	read: func(q *Reading, c *clock, v view) {
		q.readExt(v, func(e *extField, from int) {
			if i := strings.LastIndexByte(e.rest, '-'); i > 0 {
				q.readNumbers(c, e.vals.v, fieldOf(e.rest[i+1:]), resetRFC3339, from, "", lowerASCII(e.rest[:i]))
			}
		})
	},
})
