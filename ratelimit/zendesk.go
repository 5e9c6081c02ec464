package ratelimit

import (
	"strings"
)

var _ = register(&dialect{
	name:     "Zendesk",
	rank:     rankZendesk,
	families: []family{{prefix: "Zendesk-Ratelimit-"}},
	read: func(q *Reading, c *clock, v view) {
		q.readExt(v, func(e *extField, from int) { q.readZendesk(c, e, from) })
	},
})

// readZendesk reads Zendesk-RateLimit-<endpoint>: total=100; remaining=99;
// resets=41 (not a Structured Field: ";" separates members).
// https://developer.zendesk.com/api-reference/introduction/rate-limits/
func (q *Reading) readZendesk(c *clock, e *extField, from int) {
	name := lowerASCII(e.rest)
	for _, v := range e.vals.v {
		for kv := range strings.SplitSeq(v, ";") {
			k, val, _ := strings.Cut(kv, "=")
			switch trimOWS(k) {
			case "total":
				if n, ok := parseCount(val); ok {
					q.policy(from, name, "requests").setLimit(n)
				}
			case "remaining":
				if n, ok := parseCount(val); ok {
					q.policy(from, name, "requests").setRemaining(n)
				}
			case "resets":
				if d, ok := c.reset(val, resetAuto); ok {
					q.policy(from, name, "requests").setResetAt(d, c.stated)
				}
			}
		}
	}
}
