package ratelimit

import (
	"time"
)

var _ = register(&dialect{
	name:     "HubSpot",
	rank:     rankHubSpot,
	families: []family{{prefix: "X-Hubspot-Ratelimit-"}},
	read: func(q *Reading, _ *clock, v view) {
		q.readExt(v, q.readHubSpot)
	},
})

// readHubSpot reads X-HubSpot-RateLimit-{Max,Remaining,Interval-Milliseconds}
// (the burst policy, unnamed), -Daily, -Daily-Remaining, -Secondly and
// -Secondly-Remaining.
// https://developers.hubspot.com/docs/guides/apps/api-usage/usage-details
func (q *Reading) readHubSpot(e *extField, from int) {
	var name string
	var window time.Duration
	field := 0
	switch e.rest {
	case "Max":
		field = fieldLimit
	case "Remaining":
		field = fieldRemaining
	case "Daily":
		name, window, field = "daily", 24*time.Hour, fieldLimit
	case "Daily-Remaining":
		name, window, field = "daily", 24*time.Hour, fieldRemaining
	case "Secondly":
		name, window, field = "secondly", time.Second, fieldLimit
	case "Secondly-Remaining":
		name, window, field = "secondly", time.Second, fieldRemaining
	case "Interval-Milliseconds":
		for _, v := range e.vals.v {
			if n, ok := parseUint(trimOWS(v)); ok && n > 0 {
				if w, ok := millis(n, 0); ok {
					q.policy(from, "", "requests").setWindow(w)
				}
			}
		}
		return
	default:
		return
	}
	for _, v := range e.vals.v {
		n, ok := parseCount(v)
		if !ok {
			continue
		}
		p := q.policy(from, name, "requests")
		if window > 0 {
			p.setWindow(window)
		}
		if field == fieldLimit {
			p.setLimit(n)
		} else {
			p.setRemaining(n)
		}
	}
}
