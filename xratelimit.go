package throttle

import (
	"math"
	"strings"
	"time"
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
// A reset is read by its form, as [ParseQuota] describes: no single
// documented meaning covers every API that sends the family.
func (q *Quota) readXRateLimit(c *clock, f *fields) {
	q.NearLimit = isTrue(f.vals(slotXNear))
	q.Global = isTrue(f.vals(slotXGlobal)) || strings.EqualFold(first(f.vals(slotXScope)), "global")
	if len(f.vals(slotXLimit))+len(f.vals(slotXRemaining))+len(f.vals(slotXReset))+len(f.vals(slotXResetAfter))+len(f.vals(slotXUsed)) == 0 {
		return
	}
	p := Policy{Name: first(f.vals(slotXResource)), Unit: "requests", Scope: first(f.vals(slotXScope))}
	if p.Name == "" {
		p.Name = first(f.vals(slotXBucket))
	}
	if p.Scope == "" && isTrue(f.vals(slotXGlobal)) {
		p.Scope = "global"
	}
	var extra []Policy
	for _, v := range f.vals(slotXLimit) {
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
			case n == p.Limit && hasW && p.Known&HasWindow == 0:
				p.setWindow(w)
			case len(extra) < maxPolicies:
				e := Policy{Unit: "requests", Limit: n, Known: HasLimit}
				if hasW {
					e.Window, e.Known = w, e.Known|HasWindow
				}
				extra = append(extra, e)
			}
		})
	}
	for _, v := range f.vals(slotXRemaining) {
		if n, ok := parseCount(v); ok {
			p.setRemaining(n)
		}
	}
	used, hasUsed := int64(0), false
	for _, v := range f.vals(slotXUsed) {
		if n, ok := parseCount(v); ok && (!hasUsed || n > used) {
			used, hasUsed = n, true
		}
	}
	if hasUsed {
		switch {
		case p.Known&HasRemaining == 0 && p.Known&HasLimit != 0:
			p.setRemaining(max(p.Limit-used, 0))
		case p.Known&HasRemaining != 0 && p.Known&HasLimit == 0 && used <= math.MaxInt64-p.Remaining:
			// Reddit sends used and remaining only. A sum past int64 is
			// no limit any server has: absent, like any overflow.
			p.setLimit(used + p.Remaining)
		}
	}
	for _, v := range f.vals(slotXInterval) {
		if n, ok := parseUint(trimOWS(v)); ok && n > 0 {
			if w, ok := seconds(n, 0); ok {
				p.setWindow(w)
			}
		}
	}
	// Discord's -Reset-After is relative, so no clock is involved: it wins
	// over -Reset, which says the same as an epoch.
	for _, v := range f.vals(slotXResetAfter) {
		if whole, nano, ok := parseDecimal(v); ok {
			if d, ok := seconds(whole, nano); ok {
				p.setReset(d)
			}
		}
	}
	if p.Known&HasReset == 0 {
		for _, v := range f.vals(slotXReset) {
			if d, ok := c.reset(v, resetAuto); ok {
				p.setReset(d)
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
