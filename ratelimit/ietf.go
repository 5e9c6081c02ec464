package ratelimit

import (
	"time"

	"github.com/dunglas/httpsfv"
)

// The IETF fields, draft-ietf-httpapi-ratelimit-headers, every generation
// still served:
//
//   - draft-00 to -02 (and draft-polli-ratelimit-headers):
//     RateLimit-Limit: 10, 10;w=1, 50;w=60 — the current limit, then the
//     quota policies (window= in the oldest spelling) — with
//     RateLimit-Remaining and RateLimit-Reset (delta seconds).
//     https://datatracker.ietf.org/doc/html/draft-ietf-httpapi-ratelimit-headers-02
//   - draft-03 to -06: the same trio, the policies moved to
//     RateLimit-Policy: 10;w=1, 50;w=60.
//     https://datatracker.ietf.org/doc/html/draft-ietf-httpapi-ratelimit-headers-06
//   - draft-07: RateLimit: limit=100, remaining=50, reset=5 (a Dictionary)
//     beside RateLimit-Policy.
//     https://datatracker.ietf.org/doc/html/draft-ietf-httpapi-ratelimit-headers-07
//   - draft-08 and later: named policies,
//     RateLimit-Policy: "burst";q=100;w=60, "daily";q=1000;w=86400 (params q
//     w qu pk) and RateLimit: "burst";r=50;t=30 (params r t pk), matched by
//     name.
//     https://www.ietf.org/archive/id/draft-ietf-httpapi-ratelimit-headers-10.txt
//
// GitLab sends the trio with RateLimit-Reset as an epoch and
// RateLimit-ResetTime as an HTTP-date
// (https://docs.gitlab.com/administration/settings/user_and_ip_rate_limits/);
// Docker Hub sends ratelimit-limit: 100;w=21600
// (https://docs.docker.com/docker-hub/usage/pulls/). The epoch guess of
// [Parse] reads GitLab's reset without breaking the drafts' deltas. It
// applies to RateLimit-Reset only: draft-07's reset key and draft-08's t
// parameter are delay-seconds by definition and never guessed, so a huge
// one is over a year and absent, not a date.
//
// Structured Fields are parsed with httpsfv (RFC 9651). A field that does not
// parse is ignored whole; a parameter of the wrong type (q="100", w=1.5, a
// negative number) is absent, and the rest of its member is kept.

var _ = register(&dialect{
	name: "IETF RateLimit",
	rank: rankIETF,
	keys: map[string]int{
		"Ratelimit":           ietfRateLimit,
		"Ratelimit-Policy":    ietfPolicy,
		"Ratelimit-Limit":     ietfLimit,
		"Ratelimit-Remaining": ietfRemaining,
		"Ratelimit-Reset":     ietfReset,
		"Ratelimit-Resettime": ietfResetTime,
	},
	read: (*Reading).readIETF,
})

// The IETF dialect's fields.
const (
	ietfRateLimit = iota
	ietfPolicy
	ietfLimit
	ietfRemaining
	ietfReset
	ietfResetTime
)

// quotaPolicy is an unnamed policy of the drafts up to -07: a limit and,
// when given, its window.
type quotaPolicy struct {
	limit  int64
	window time.Duration
	hasWin bool
}

func (q *Reading) readIETF(c *clock, v view) {
	var unnamed []quotaPolicy
	from := len(q.Policies)
	if policy := v.vals(ietfPolicy); len(policy) > 0 {
		if l, err := httpsfv.UnmarshalList(policy); err == nil {
			unnamed = q.readPolicyList(l)
		}
	}
	if rl := v.vals(ietfRateLimit); len(rl) > 0 {
		if d, err := httpsfv.UnmarshalDictionary(rl); err == nil && isDraft07(d) {
			unnamed = q.readDraft07(d, unnamed)
		} else if l, err := httpsfv.UnmarshalList(rl); err == nil {
			q.readNamedLimits(l, from)
		}
	}
	if len(v.vals(ietfLimit))+len(v.vals(ietfRemaining))+len(v.vals(ietfReset))+len(v.vals(ietfResetTime)) > 0 {
		unnamed = q.readTrio(c, v, unnamed)
	}
	for _, u := range unnamed {
		p := Policy{Unit: "requests", Limit: u.limit, HasLimit: true}
		if u.hasWin {
			p.Window, p.HasWindow = u.window, true
		}
		q.add(p)
	}
}

// readPolicyList reads RateLimit-Policy: named members (draft-08+) become
// policies; unnamed integer members (drafts up to -07) are returned, to be
// matched with the current limit.
func (q *Reading) readPolicyList(l httpsfv.List) (unnamed []quotaPolicy) {
	from := len(q.Policies)
	for _, m := range l {
		it, ok := m.(httpsfv.Item)
		if !ok {
			continue
		}
		if n, ok := sfInt(it.Value); ok {
			if len(unnamed) < maxPolicies {
				u := quotaPolicy{limit: n}
				u.window, u.hasWin = sfWindow(it.Params)
				unnamed = append(unnamed, u)
			}
			continue
		}
		name, ok := sfName(it.Value)
		if !ok {
			continue
		}
		unit := "requests"
		if v, ok := param(it.Params, "qu"); ok {
			if s, ok := sfName(v); ok && s != "" {
				unit = s
			}
		}
		p := q.named(from, name)
		p.Unit = unit
		if v, ok := param(it.Params, "q"); ok {
			if n, ok := sfInt(v); ok {
				p.setLimit(n)
			}
		}
		if w, ok := sfWindow(it.Params); ok {
			p.setWindow(w)
		}
		readPartition(p, it.Params)
	}
	return unnamed
}

// readNamedLimits reads draft-08+'s RateLimit: each member names a policy
// of RateLimit-Policy (or a new one) and gives r and t.
func (q *Reading) readNamedLimits(l httpsfv.List, from int) {
	for _, m := range l {
		it, ok := m.(httpsfv.Item)
		if !ok {
			continue
		}
		name, ok := sfName(it.Value)
		if !ok {
			continue
		}
		p := q.named(from, name)
		if p.Unit == "" {
			p.Unit = "requests"
		}
		if v, ok := param(it.Params, "r"); ok {
			if n, ok := sfInt(v); ok {
				p.setRemaining(n)
			}
		}
		// t is delay-seconds by definition (draft-ietf-httpapi-ratelimit-
		// headers-10, the RateLimit field): a large one is over maxWait
		// and absent, never an epoch.
		if v, ok := param(it.Params, "t"); ok {
			if n, ok := sfInt(v); ok {
				if d, ok := seconds(n, 0); ok {
					p.setReset(d)
				}
			}
		}
		readPartition(p, it.Params)
	}
}

// named finds the policy called name among q.Policies[from:], by name
// alone (the draft matches RateLimit to RateLimit-Policy by name), or
// appends it.
func (q *Reading) named(from int, name string) *Policy {
	for i := from; i < len(q.Policies); i++ {
		if q.Policies[i].Name == name {
			return &q.Policies[i]
		}
	}
	return q.policy(from, name, "")
}

func isDraft07(d *httpsfv.Dictionary) bool {
	for _, k := range [...]string{"limit", "remaining", "reset"} {
		if _, ok := d.Get(k); ok {
			return true
		}
	}
	return false
}

// readDraft07 reads RateLimit: limit=100, remaining=50, reset=5. The window
// comes from the RateLimit-Policy member whose quota equals the limit.
func (q *Reading) readDraft07(d *httpsfv.Dictionary, unnamed []quotaPolicy) []quotaPolicy {
	p := Policy{Unit: "requests"}
	if n, ok := dictInt(d, "limit"); ok {
		p.setLimit(n)
	}
	if n, ok := dictInt(d, "remaining"); ok {
		p.setRemaining(n)
	}
	// reset is delay-seconds by definition (draft-ietf-httpapi-ratelimit-headers-07,
	// the RateLimit field): never an epoch.
	if n, ok := dictInt(d, "reset"); ok {
		if r, ok := seconds(n, 0); ok {
			p.setReset(r)
		}
	}
	unnamed = matchWindow(&p, unnamed)
	q.add(p)
	return unnamed
}

// readTrio reads RateLimit-Limit, -Remaining, -Reset (and GitLab's
// RateLimit-ResetTime). Values that are plain numbers are read without
// Structured Fields, which also takes GitLab's epoch and float-free
// integers; anything else is parsed as an SF List.
func (q *Reading) readTrio(c *clock, v view, unnamed []quotaPolicy) []quotaPolicy {
	p := Policy{Unit: "requests"}
	if len(v.vals(ietfLimit)) > 0 {
		limitList(v.vals(ietfLimit), func(i int, n int64, w time.Duration, hasW bool) {
			if i == 0 {
				// The first member is the limit in force now.
				p.setLimit(n)
				if hasW {
					p.setWindow(w)
				}
			} else if len(unnamed) < maxPolicies {
				unnamed = append(unnamed, quotaPolicy{n, w, hasW})
			}
		})
	}
	for _, v := range v.vals(ietfRemaining) {
		if n, ok := parseUint(trimOWS(v)); ok {
			p.setRemaining(n)
		} else if it, ok := firstItem(v); ok {
			if n, ok := sfInt(it.Value); ok {
				p.setRemaining(n)
			}
			if w, ok := sfWindow(it.Params); ok && !p.HasWindow {
				p.setWindow(w)
			}
		}
	}
	for _, v := range v.vals(ietfReset) {
		if d, ok := c.reset(v, resetAuto); ok {
			p.setResetAt(d, c.stated)
		} else if it, ok := firstItem(v); ok {
			if n, ok := sfInt(it.Value); ok {
				if d, ok := c.resetSeconds(n); ok {
					p.setResetAt(d, c.stated)
				}
			}
		}
	}
	if !p.HasReset {
		for _, v := range v.vals(ietfResetTime) {
			if d, ok := c.httpDate(trimOWS(v)); ok {
				p.setResetAt(d, c.stated)
			}
		}
	}
	unnamed = matchWindow(&p, unnamed)
	q.add(p)
	return unnamed
}

// matchWindow gives p the window of the first unnamed policy with p's
// limit, and removes that policy from the list: it describes p.
func matchWindow(p *Policy, unnamed []quotaPolicy) []quotaPolicy {
	if !p.HasLimit {
		return unnamed
	}
	for i, u := range unnamed {
		if u.limit == p.Limit {
			if u.hasWin && !p.HasWindow {
				p.setWindow(u.window)
			}
			return append(unnamed[:i:i], unnamed[i+1:]...)
		}
	}
	return unnamed
}

// firstItem parses one line of a trio field as an SF List and returns its
// first member, when it is an Item.
func firstItem(v string) (httpsfv.Item, bool) {
	l, err := httpsfv.UnmarshalList([]string{v})
	if err != nil || len(l) == 0 {
		return httpsfv.Item{}, false
	}
	it, ok := l[0].(httpsfv.Item)
	return it, ok
}

// resetSeconds reads an integer reset: delta seconds, or an epoch by its
// size (GitLab's RateLimit-Reset).
func (c *clock) resetSeconds(n int64) (time.Duration, bool) {
	c.stated = time.Time{}
	switch {
	case n >= epochMillis:
		return c.until(time.UnixMilli(n))
	case n >= epochSeconds:
		return c.until(time.Unix(n, 0))
	}
	return seconds(n, 0)
}

func param(p *httpsfv.Params, k string) (any, bool) {
	if p == nil {
		return nil, false
	}
	return p.Get(k)
}

func dictInt(d *httpsfv.Dictionary, k string) (int64, bool) {
	m, ok := d.Get(k)
	if !ok {
		return 0, false
	}
	it, ok := m.(httpsfv.Item)
	if !ok {
		return 0, false
	}
	return sfInt(it.Value)
}

// sfInt accepts a non-negative SF Integer; a Decimal, a String or a
// negative number is absent.
// limitList reads a draft-02 style List of limits ("10, 10;w=1, 50;w=60",
// the limit in force now first, then the policies) and calls f with each
// Integer member: its index in the List, its value, and its window if it
// has one. A List that does not parse is ignored whole.
func limitList(lines []string, f func(i int, n int64, w time.Duration, hasW bool)) {
	l, err := httpsfv.UnmarshalList(lines)
	if err != nil {
		return
	}
	for i, m := range l {
		it, ok := m.(httpsfv.Item)
		if !ok {
			continue
		}
		if n, ok := sfInt(it.Value); ok {
			w, hasW := sfWindow(it.Params)
			f(i, n, w, hasW)
		}
	}
}

func sfInt(v any) (int64, bool) {
	n, ok := v.(int64)
	return n, ok && n >= 0
}

// sfName accepts the String or Token a policy name or unit is.
func sfName(v any) (string, bool) {
	switch s := v.(type) {
	case string:
		return s, true
	case httpsfv.Token:
		return string(s), true
	}
	return "", false
}

// sfWindow reads the w parameter, or window in the oldest drafts, as a
// positive number of seconds.
func sfWindow(p *httpsfv.Params) (time.Duration, bool) {
	v, ok := param(p, "w")
	if !ok {
		if v, ok = param(p, "window"); !ok {
			return 0, false
		}
	}
	n, ok := sfInt(v)
	if !ok || n == 0 {
		return 0, false
	}
	return seconds(n, 0)
}

// readPartition copies the pk parameter, an SF Byte Sequence.
func readPartition(p *Policy, params *httpsfv.Params) {
	if v, ok := param(params, "pk"); ok {
		if b, ok := v.([]byte); ok {
			p.Partition = string(b)
		}
	}
}
