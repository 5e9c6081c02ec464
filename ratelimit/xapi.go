package ratelimit

import (
	"strings"
	"time"
)

// X API v2's daily caps. The rest of a key keeps "User-Limit-" or
// "App-Limit-": it names the policy.
var _ = register(&dialect{
	name: "X API daily caps",
	rank: rankXAPI,
	families: []family{
		{prefix: "X-User-Limit-", keep: len("User-Limit-")},
		{prefix: "X-App-Limit-", keep: len("App-Limit-")},
	},
	read: func(q *Reading, c *clock, v view) {
		q.readExt(v, func(e *extField, from int) { q.readXDaily(c, e, from) })
	},
})

// readXDaily reads X API v2's per-user and per-app daily caps,
// x-user-limit-24hour-{limit,remaining,reset} and
// x-app-limit-24hour-{limit,remaining,reset}, sent beside the 15-minute
// x-rate-limit-* ones (POST /2/tweets: 100 a day per user, 1667 per app).
// The reset is epoch seconds, documented as such, so it is never read as a
// delta. The policies are named "user-24hour" and "app-24hour".
// https://docs.x.com/x-api/fundamentals/rate-limits
func (q *Reading) readXDaily(c *clock, e *extField, from int) {
	// e.rest is User-Limit-24hour-Remaining and the like.
	i := strings.LastIndexByte(e.rest, '-')
	who, window, ok := strings.Cut(e.rest[:max(i, 0)], "-Limit-")
	field := fieldOf(e.rest[i+1:])
	if !ok || who == "" || window == "" || field == 0 {
		return
	}
	name := lowerASCII(who) + "-" + window
	q.readNumbers(c, e.vals.v, field, resetEpoch, from, name, "requests")
	// The window, when it reads as one ("24hour"), goes to the policy
	// once a number made it.
	h, ok := strings.CutSuffix(window, "hour")
	n, ok2 := parseUint(h)
	if !ok || !ok2 || n == 0 || n > int64(maxWait/time.Hour) {
		return
	}
	for i := from; i < len(q.Policies); i++ {
		if p := &q.Policies[i]; p.Name == name && p.Unit == "requests" {
			p.setWindow(time.Duration(n) * time.Hour)
		}
	}
}
