package ratelimit

import (
	"strings"
	"time"
)

// Kong: X-RateLimit-{Limit,Remaining}-{Second,Minute,Hour,Day,Month,Year},
// one policy per window, named by it.
// https://developer.konghq.com/plugins/rate-limiting/
var _ = register(&dialect{
	name: "Kong",
	rank: rankKong,
	families: []family{{prefix: "X-Ratelimit-", accept: func(rest string) bool {
		field, window, _ := strings.Cut(rest, "-")
		_, ok := kongWindow(window)
		return ok && fieldOf(field) != 0
	}}},
	read: func(q *Reading, c *clock, v view) {
		q.readExt(v, func(e *extField, from int) {
			field, window, _ := strings.Cut(e.rest, "-")
			w, _ := kongWindow(window)
			p := q.policy(from, lowerASCII(window), "requests")
			p.setWindow(w)
			q.readNumbers(c, e.vals.v, fieldOf(field), resetAuto, from, p.Name, p.Unit)
		})
	},
})

// kongWindow maps Kong's per-window suffixes
// (https://developer.konghq.com/plugins/rate-limiting/) to their windows.
// Kong's month and year are calendar ones; 30 and 365 days are their
// lengths as a window.
func kongWindow(s string) (time.Duration, bool) {
	switch s {
	case "Second":
		return time.Second, true
	case "Minute":
		return time.Minute, true
	case "Hour":
		return time.Hour, true
	case "Day":
		return 24 * time.Hour, true
	case "Month":
		return 30 * 24 * time.Hour, true
	case "Year":
		return 365 * 24 * time.Hour, true
	}
	return 0, false
}
