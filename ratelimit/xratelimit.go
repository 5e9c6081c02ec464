package ratelimit

import (
	"math"
	"strings"
	"time"
)

// X and Okta (https://docs.x.com/x-api/fundamentals/rate-limits) spell
// the family X-Rate-Limit-*; Zendesk sends its limit as X-Rate-Limit.
var _ = register(&dialect{
	name: "X-RateLimit",
	rank: rankXRateLimit,
	keys: map[string]int{
		"X-Ratelimit-Limit":            xLimit,
		"X-Rate-Limit-Limit":           xLimit,
		"X-Rate-Limit":                 xLimit,
		"X-Ratelimit-Remaining":        xRemaining,
		"X-Rate-Limit-Remaining":       xRemaining,
		"X-Ratelimit-Reset":            xReset,
		"X-Rate-Limit-Reset":           xReset,
		"X-Ratelimit-Reset-After":      xResetAfter,
		"X-Ratelimit-Used":             xUsed,
		"X-Ratelimit-Resource":         xResource,
		"X-Ratelimit-Bucket":           xBucket,
		"X-Ratelimit-Global":           xGlobal,
		"X-Ratelimit-Scope":            xScope,
		"X-Ratelimit-Nearlimit":        xNear,
		"X-Ratelimit-Interval-Seconds": xInterval,
	},
	read: (*Reading).readXRateLimit,
})

// The X-RateLimit dialect's fields.
const (
	xLimit = iota
	xRemaining
	xReset
	xResetAfter
	xUsed
	xResource
	xBucket
	xGlobal
	xScope
	xNear
	xInterval
)

// readXRateLimit reads X-RateLimit-Limit, -Remaining, -Reset and the
// fields around them, as the APIs that use the family document them:
//
//   - GitHub: reset is an epoch in seconds; -Used, -Resource names the
//     policy ("core", "search").
//     https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api
//   - X and Okta spell it X-Rate-Limit-*; reset is an epoch in seconds.
//     https://docs.x.com/x-api/fundamentals/rate-limits
//     https://developer.okta.com/docs/reference/rl-best-practices/
//   - SendGrid: reset is an epoch in seconds.
//     https://www.twilio.com/docs/sendgrid/api-reference/how-to-use-the-sendgrid-v3-api/rate-limits
//   - Envoy: limit is a list in the IETF draft-03 form ("10, 10;w=60"),
//     reset a delay in seconds.
//     https://www.envoyproxy.io/docs/envoy/latest/api-v3/extensions/filters/http/ratelimit/v3/rate_limit.proto
//   - Discord: -Reset-After in float seconds, -Reset a float epoch, -Bucket,
//     -Global, -Scope.
//     https://discord.com/developers/docs/topics/rate-limits
//   - Reddit: remaining is a float ("598.0"), -Used, reset a delay.
//     https://support.reddithelp.com/hc/en-us/articles/16160319875092-Reddit-Data-API-Wiki
//   - Atlassian: reset is an ISO 8601 time; X-RateLimit-NearLimit: true
//     below 20% of the budget; -Interval-Seconds is the window.
//     https://developer.atlassian.com/cloud/jira/platform/rate-limiting/
//   - Zendesk: X-Rate-Limit and X-Rate-Limit-Remaining.
//     https://developer.zendesk.com/api-reference/introduction/rate-limits/
//
// A reset is read by its form, as [Parse] describes: no single
// documented meaning covers every API that sends the family.
func (q *Reading) readXRateLimit(c *clock, v view) {
	q.NearLimit = isTrue(v.vals(xNear))
	q.Global = isTrue(v.vals(xGlobal)) || strings.EqualFold(first(v.vals(xScope)), "global")
	if len(v.vals(xLimit))+len(v.vals(xRemaining))+len(v.vals(xReset))+len(v.vals(xResetAfter))+len(v.vals(xUsed)) == 0 {
		return
	}
	p := Policy{Name: first(v.vals(xResource)), Unit: "requests", Scope: first(v.vals(xScope))}
	if p.Name == "" {
		p.Name = first(v.vals(xBucket))
	}
	if p.Scope == "" && isTrue(v.vals(xGlobal)) {
		p.Scope = "global"
	}
	var extra []Policy
	for _, v := range v.vals(xLimit) {
		if n, ok := parseCount(v); ok {
			p.setLimit(n)
			continue
		}
		// Envoy's "10, 10;w=60": the limit now, then its policies.
		limitList([]string{v}, func(i int, n int64, w time.Duration, hasW bool) {
			switch {
			case i == 0:
				p.setLimit(n)
				if hasW {
					p.setWindow(w)
				}
			case n == p.Limit && hasW && !p.HasWindow:
				p.setWindow(w)
			case len(extra) < maxPolicies:
				e := Policy{Unit: "requests", Limit: n, HasLimit: true}
				if hasW {
					e.Window, e.HasWindow = w, true
				}
				extra = append(extra, e)
			}
		})
	}
	for _, v := range v.vals(xRemaining) {
		if n, ok := parseCount(v); ok {
			p.setRemaining(n)
		}
	}
	used, hasUsed := int64(0), false
	for _, v := range v.vals(xUsed) {
		if n, ok := parseCount(v); ok && (!hasUsed || n > used) {
			used, hasUsed = n, true
		}
	}
	if hasUsed {
		switch {
		case !p.HasRemaining && p.HasLimit:
			p.setRemaining(max(p.Limit-used, 0))
		case p.HasRemaining && !p.HasLimit && used <= math.MaxInt64-p.Remaining:
			// Reddit sends used and remaining only. A sum past int64 is
			// no limit any server has: absent, like any overflow.
			p.setLimit(used + p.Remaining)
		}
	}
	for _, v := range v.vals(xInterval) {
		if n, ok := parseUint(trimOWS(v)); ok && n > 0 {
			if w, ok := seconds(n, 0); ok {
				p.setWindow(w)
			}
		}
	}
	// Discord's -Reset-After is relative, so no clock is involved: it wins
	// over -Reset, which says the same as an epoch.
	for _, v := range v.vals(xResetAfter) {
		if whole, nano, ok := parseDecimal(v); ok {
			if d, ok := seconds(whole, nano); ok {
				p.setReset(d)
			}
		}
	}
	if !p.HasReset {
		for _, v := range v.vals(xReset) {
			if d, ok := c.reset(v, resetAuto); ok {
				p.setResetAt(d, c.stated)
			}
		}
	}
	q.add(p)
	for _, e := range extra {
		q.add(e)
	}
}

// first returns the first non-empty value, trimmed.
func first(vs []string) string {
	for _, v := range vs {
		if v = trimOWS(v); v != "" {
			return v
		}
	}
	return ""
}

func isTrue(vs []string) bool {
	for _, v := range vs {
		if strings.EqualFold(trimOWS(v), "true") {
			return true
		}
	}
	return false
}
