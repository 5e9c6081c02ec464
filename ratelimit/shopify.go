package ratelimit

import ()

var _ = register(&dialect{
	name: "Shopify",
	rank: rankShopify,
	keys: map[string]int{"X-Shopify-Shop-Api-Call-Limit": 0},
	read: func(q *Reading, _ *clock, v view) {
		if vals := v.vals(0); len(vals) > 0 {
			q.readShopify(vals)
		}
	},
})

// readShopify reads X-Shopify-Shop-Api-Call-Limit: 32/40, the bucket's
// used and total size.
// https://shopify.dev/docs/api/admin-rest/usage/rate-limits
func (q *Reading) readShopify(vals []string) {
	from := len(q.Policies)
	for _, v := range vals {
		if used, limit, ok := usedOf(v); ok {
			p := q.policy(from, "", "requests")
			p.setLimit(limit)
			p.setRemaining(max(limit-used, 0))
		}
	}
}
