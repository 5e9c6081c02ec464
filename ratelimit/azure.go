package ratelimit

import (
	"strings"
)

var _ = register(&dialect{
	name:     "Azure Resource Manager",
	rank:     rankAzure,
	families: []family{{prefix: "X-Ms-Ratelimit-Remaining-"}},
	read: func(q *Reading, _ *clock, v view) {
		q.readExt(v, q.readAzure)
	},
})

// readAzure reads Azure Resource Manager's remaining-only fields,
// x-ms-ratelimit-remaining-{subscription,tenant}-{reads,writes,deletes,…},
// and x-ms-ratelimit-remaining-resource, a list of "policy;remaining".
// https://learn.microsoft.com/en-us/azure/azure-resource-manager/management/request-limits-and-throttling
func (q *Reading) readAzure(e *extField, from int) {
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
