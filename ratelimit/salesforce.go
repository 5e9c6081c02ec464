package ratelimit

import (
	"strings"
	"time"
)

var _ = register(&dialect{
	name: "Salesforce",
	rank: rankSalesforce,
	keys: map[string]int{"Sforce-Limit-Info": 0},
	read: func(q *Reading, _ *clock, v view) {
		if vals := v.vals(0); len(vals) > 0 {
			q.readSalesforce(vals)
		}
	},
})

// readSalesforce reads Sforce-Limit-Info: api-usage=25/15000, a list of
// name=used/limit over a rolling 24 hours; a per-app entry carries its app
// in parentheses. The documented example separates entries with "; "
// (api-usage=25/5000; per-app-api-usage=17/250(appName=sample-connected-app)),
// other responses with ", ": both are read.
// https://developer.salesforce.com/docs/atlas.en-us.api_rest.meta/api_rest/headers_api_usage.htm
func (q *Reading) readSalesforce(vals []string) {
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
