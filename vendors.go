package throttle

import (
	"strings"
	"time"
)

// readVendors reads the dialects whose keys carry a unit, a window or a
// name, then Shopify's and Salesforce's single fields. f.ext is sorted, so
// the policies come out in the same order for the same headers.
func (q *Quota) readVendors(c *clock, f *fields) {
	for i := 0; i < f.next; {
		fam, from := f.ext[i].fam, len(q.Policies)
		for ; i < f.next && f.ext[i].fam == fam; i++ {
			q.readExt(c, &f.ext[i], from)
		}
	}
	if len(f.vals(slotShopify)) > 0 {
		q.readShopify(f.vals(slotShopify))
	}
	if len(f.vals(slotSalesforce)) > 0 {
		q.readSalesforce(f.vals(slotSalesforce))
	}
}

// The three numbers a per-unit field gives.
const (
	fieldLimit = iota + 1
	fieldRemaining
	fieldReset
)

func fieldOf(s string) int {
	switch s {
	case "Limit":
		return fieldLimit
	case "Remaining":
		return fieldRemaining
	case "Reset":
		return fieldReset
	}
	return 0
}

func (q *Quota) readExt(c *clock, e *extField, from int) {
	switch e.fam {
	case famSuffix:
		// OpenAI and Groq: x-ratelimit-{limit,remaining,reset}-{requests,tokens},
		// resets as Go durations ("6m0s", "2m59.56s").
		// https://platform.openai.com/docs/guides/rate-limits
		// https://console.groq.com/docs/rate-limits
		// Kong: X-RateLimit-{Limit,Remaining}-{Second,…,Year}.
		// https://developer.konghq.com/plugins/rate-limiting/
		field, part, _ := strings.Cut(e.rest, "-")
		if w, ok := kongWindow(part); ok {
			p := q.policy(from, lowerASCII(part), "requests")
			p.setWindow(w)
			q.readNumbers(c, e.vals.v, fieldOf(field), resetAuto, from, p.Name, p.Unit)
			return
		}
		q.readNumbers(c, e.vals.v, fieldOf(field), resetDuration, from, "", lowerASCII(part))
	case famInfix:
		// Linear: X-RateLimit-{Requests,Complexity}-{Limit,Remaining,Reset},
		// resets in epoch milliseconds.
		// https://linear.app/developers/rate-limiting
		i := strings.LastIndexByte(e.rest, '-')
		q.readNumbers(c, e.vals.v, fieldOf(e.rest[i+1:]), resetAuto, from, "", lowerASCII(e.rest[:i]))
	case famAnthropic:
		// anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-
		// {limit,remaining,reset}, resets in RFC 3339.
		// https://docs.anthropic.com/en/api/rate-limits
		i := strings.LastIndexByte(e.rest, '-')
		if i > 0 {
			q.readNumbers(c, e.vals.v, fieldOf(e.rest[i+1:]), resetRFC3339, from, "", lowerASCII(e.rest[:i]))
		}
	case famAzure:
		q.readAzure(e, from)
	case famZendesk:
		q.readZendesk(c, e, from)
	case famHubSpot:
		q.readHubSpot(e, from)
	case famXDaily:
		q.readXDaily(c, e, from)
	}
}

// readXDaily reads X API v2's per-user and per-app daily caps,
// x-user-limit-24hour-{limit,remaining,reset} and
// x-app-limit-24hour-{limit,remaining,reset}, sent beside the 15-minute
// x-rate-limit-* ones (POST /2/tweets: 100 a day per user, 1667 per app).
// The reset is epoch seconds, documented as such, so it is never read as a
// delta. The policies are named "user-24hour" and "app-24hour".
// https://docs.x.com/x-api/fundamentals/rate-limits
func (q *Quota) readXDaily(c *clock, e *extField, from int) {
	// e.rest is User-Limit-24hour-Remaining and the like.
	i := strings.LastIndexByte(e.rest, '-')
	who, window, ok := strings.Cut(e.rest[:max(i, 0)], "-Limit-")
	field := fieldOf(e.rest[i+1:])
	if !ok || who == "" || window == "" || field == 0 {
		return
	}
	name := lowerASCII(who) + "-" + window
	for _, v := range e.vals.v {
		switch field {
		case fieldLimit:
			if n, ok := parseCount(v); ok {
				q.xDaily(from, name, window).setLimit(n)
			}
		case fieldRemaining:
			if n, ok := parseCount(v); ok {
				q.xDaily(from, name, window).setRemaining(n)
			}
		case fieldReset:
			if d, ok := c.reset(v, resetEpoch); ok {
				q.xDaily(from, name, window).setReset(d)
			}
		}
	}
}

// xDaily returns X's policy called name, with its window when window
// reads as one ("24hour").
func (q *Quota) xDaily(from int, name, window string) *Policy {
	p := q.policy(from, name, "requests")
	if h, ok := strings.CutSuffix(window, "hour"); ok {
		if n, ok := parseUint(h); ok && n > 0 && n <= int64(maxWait/time.Hour) {
			p.setWindow(time.Duration(n) * time.Hour)
		}
	}
	return p
}

// readNumbers applies every value of one field to the policy (name, unit).
func (q *Quota) readNumbers(c *clock, vals []string, field int, kind resetKind, from int, name, unit string) {
	if field == 0 || unit == "" {
		return
	}
	for _, v := range vals {
		switch field {
		case fieldLimit:
			if n, ok := parseCount(v); ok {
				q.policy(from, name, unit).setLimit(n)
			}
		case fieldRemaining:
			if n, ok := parseCount(v); ok {
				q.policy(from, name, unit).setRemaining(n)
			}
		case fieldReset:
			if d, ok := c.reset(v, kind); ok {
				q.policy(from, name, unit).setReset(d)
			}
		}
	}
}

// readAzure reads Azure Resource Manager's remaining-only fields,
// x-ms-ratelimit-remaining-{subscription,tenant}-{reads,writes,deletes,…},
// and x-ms-ratelimit-remaining-resource, a list of "policy;remaining".
// https://learn.microsoft.com/en-us/azure/azure-resource-manager/management/request-limits-and-throttling
func (q *Quota) readAzure(e *extField, from int) {
	if e.rest != "Resource" {
		for _, v := range e.vals.v {
			if n, ok := parseCount(v); ok {
				q.policy(from, lowerASCII(e.rest), "requests").setRemaining(n)
			}
		}
		return
	}
	for _, v := range e.vals.v {
		for item := range strings.SplitSeq(v, ",") {
			name, count, ok := strings.Cut(item, ";")
			if name = trimOWS(name); !ok || name == "" {
				continue
			}
			if n, ok := parseCount(count); ok {
				q.policy(from, name, "requests").setRemaining(n)
			}
		}
	}
}

// readZendesk reads Zendesk-RateLimit-<endpoint>: total=100; remaining=99;
// resets=41 (not a Structured Field: ";" separates members).
// https://developer.zendesk.com/api-reference/introduction/rate-limits/
func (q *Quota) readZendesk(c *clock, e *extField, from int) {
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
					q.policy(from, name, "requests").setReset(d)
				}
			}
		}
	}
}

// readHubSpot reads X-HubSpot-RateLimit-{Max,Remaining,Interval-Milliseconds}
// (the burst policy, unnamed), -Daily, -Daily-Remaining, -Secondly and
// -Secondly-Remaining.
// https://developers.hubspot.com/docs/guides/apps/api-usage/usage-details
func (q *Quota) readHubSpot(e *extField, from int) {
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

// readShopify reads X-Shopify-Shop-Api-Call-Limit: 32/40, the bucket's
// used and total size.
// https://shopify.dev/docs/api/admin-rest/usage/rate-limits
func (q *Quota) readShopify(vals []string) {
	from := len(q.Policies)
	for _, v := range vals {
		if used, limit, ok := usedOf(v); ok {
			p := q.policy(from, "", "requests")
			p.setLimit(limit)
			p.setRemaining(max(limit-used, 0))
		}
	}
}

// readSalesforce reads Sforce-Limit-Info: api-usage=25/15000, a list of
// name=used/limit over a rolling 24 hours; a per-app entry carries its app
// in parentheses. The documented example separates entries with "; "
// (api-usage=25/5000; per-app-api-usage=17/250(appName=sample-connected-app)),
// other responses with ", ": both are read.
// https://developer.salesforce.com/docs/atlas.en-us.api_rest.meta/api_rest/headers_api_usage.htm
func (q *Quota) readSalesforce(vals []string) {
	from := len(q.Policies)
	for _, v := range vals {
		for item := range splitAny(v, ",;") {
			name, usage, ok := strings.Cut(item, "=")
			if name = trimOWS(name); !ok || name == "" {
				continue
			}
			if i := strings.IndexByte(usage, '('); i >= 0 {
				usage = usage[:i]
			}
			if used, limit, ok := usedOf(usage); ok {
				p := q.policy(from, name, "requests")
				p.setLimit(limit)
				p.setRemaining(max(limit-used, 0))
				p.setWindow(24 * time.Hour)
			}
		}
	}
}

// splitAny yields the substrings of s between any of the bytes in seps,
// as strings.SplitSeq does for one separator.
func splitAny(s, seps string) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		for {
			i := strings.IndexAny(s, seps)
			if i < 0 {
				yield(s)
				return
			}
			if !yield(s[:i]) {
				return
			}
			s = s[i+1:]
		}
	}
}

// usedOf reads "used/limit".
func usedOf(v string) (used, limit int64, ok bool) {
	u, l, found := strings.Cut(v, "/")
	if !found {
		return 0, 0, false
	}
	used, ok1 := parseUint(trimOWS(u))
	limit, ok2 := parseUint(trimOWS(l))
	return used, limit, ok1 && ok2
}
