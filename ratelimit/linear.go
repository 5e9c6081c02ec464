package ratelimit

import (
	"strings"
)

// Linear: X-RateLimit-{Requests,Complexity}-{Limit,Remaining,Reset}, the
// unit before the field, resets in epoch milliseconds.
// https://linear.app/developers/rate-limiting
var _ = register(&dialect{
	name: "Linear",
	rank: rankLinear,
	families: []family{{prefix: "X-Ratelimit-", accept: func(rest string) bool {
		i := strings.LastIndexByte(rest, '-')
		return i > 0 && fieldOf(rest[i+1:]) != 0
	}}},
	read: func(q *Reading, c *clock, v view) {
		q.readExt(v, func(e *extField, from int) {
			i := strings.LastIndexByte(e.rest, '-')
			q.readNumbers(c, e.vals.v, fieldOf(e.rest[i+1:]), resetAuto, from, "", lowerASCII(e.rest[:i]))
		})
	},
})
