package throttle

import (
	"net/http"
	"net/textproto"
	"slices"
	"strings"
)

// fields holds the values of the header fields ParseQuota reads, gathered
// in one pass over the header map so that each key is canonicalized once
// and looked up once, not probed for per dialect. The keys read are listed
// once, in slots and extFamilies; nothing else needs to keep in step.
type fields struct {
	slot [numSlots]lines // the fields read whole, by slot

	// Families whose key carries a variable part (a unit, a window, a
	// name). Bounded: a response with more such keys than fit is read in
	// part, never without bound.
	ext  [maxExt]extField
	next int
}

// vals returns the lines of the field in slot s.
func (f *fields) vals(s slot) []string { return f.slot[s].v }

// slot names a field read whole. The order is the order in which the
// response's budget admits fields (see budget): the Retry-After family and
// Date first.
type slot uint8

const (
	slotRetryAfter slot = iota
	slotRetryAfterMS
	slotMsRetryAfterMS
	slotShouldRetry
	slotDate

	// IETF draft-ietf-httpapi-ratelimit-headers, every generation.
	slotRateLimit
	slotRlPolicy
	slotRlLimit
	slotRlRemaining
	slotRlReset
	slotRlResetTime

	// X-RateLimit-* and X-Rate-Limit-*.
	slotXLimit
	slotXRemaining
	slotXReset
	slotXResetAfter
	slotXUsed
	slotXResource
	slotXBucket
	slotXGlobal
	slotXScope
	slotXNear
	slotXInterval

	slotShopify
	slotSalesforce

	numSlots
)

const maxExt = 32

type family uint8

const (
	famSuffix    family = iota // X-RateLimit-{Limit,Remaining,Reset}-<unit or window> (OpenAI, Groq, Kong)
	famInfix                   // X-RateLimit-<unit>-{Limit,Remaining,Reset} (Linear)
	famAnthropic               // anthropic-ratelimit-<unit>-{limit,remaining,reset}
	famAzure                   // x-ms-ratelimit-remaining-<name>
	famZendesk                 // Zendesk-RateLimit-<name>
	famHubSpot                 // X-HubSpot-RateLimit-*
	famXDaily                  // X API v2: x-{user,app}-limit-24hour-{limit,remaining,reset}
)

// extField is one field of a family with a variable key.
type extField struct {
	fam  family
	rest string // the key after the family's prefix, canonical case
	vals lines
}

// collect sorts h's fields into f, then applies the byte budgets. Keys are
// canonicalized, which costs no allocation for keys already canonical
// (textproto returns them as is). The cost is linear in the size of h,
// however many keys differ only in case.
func (f *fields) collect(h http.Header) {
	for k, v := range h {
		if len(v) == 0 || k == "" || len(k) > maxKeyBytes || !keyStarts[k[0]] {
			continue
		}
		ck := textproto.CanonicalMIMEHeaderKey(k)
		if s, ok := slots[ck]; ok {
			f.slot[s].add(v)
			continue
		}
		f.collectExt(ck, v)
	}
	// Map order is random; the policies built from ext must not be.
	slices.SortFunc(f.ext[:f.next], func(a, b extField) int {
		if a.fam != b.fam {
			return int(a.fam) - int(b.fam)
		}
		return strings.Compare(a.rest, b.rest)
	})
	f.budget()
}

// slots maps every key ParseQuota reads whole, in canonical form, to the
// field it fills. With extFamilies it is the one list of the keys read:
// collect's quick rejection of other keys is computed from the two, so a
// dialect added to either is read.
var slots = map[string]slot{
	"Date":                slotDate,
	"Retry-After":         slotRetryAfter,
	"Retry-After-Ms":      slotRetryAfterMS,
	"X-Ms-Retry-After-Ms": slotMsRetryAfterMS,
	"X-Should-Retry":      slotShouldRetry,
	"Ratelimit":           slotRateLimit,
	"Ratelimit-Policy":    slotRlPolicy,
	"Ratelimit-Limit":     slotRlLimit,
	"Ratelimit-Remaining": slotRlRemaining,
	"Ratelimit-Reset":     slotRlReset,
	"Ratelimit-Resettime": slotRlResetTime,
	// X (https://docs.x.com/x-api/fundamentals/rate-limits) and Okta
	// spell the family X-Rate-Limit-*; Zendesk sends its limit as
	// X-Rate-Limit.
	"X-Ratelimit-Limit":             slotXLimit,
	"X-Rate-Limit-Limit":            slotXLimit,
	"X-Rate-Limit":                  slotXLimit,
	"X-Ratelimit-Remaining":         slotXRemaining,
	"X-Rate-Limit-Remaining":        slotXRemaining,
	"X-Ratelimit-Reset":             slotXReset,
	"X-Rate-Limit-Reset":            slotXReset,
	"X-Ratelimit-Reset-After":       slotXResetAfter,
	"X-Ratelimit-Used":              slotXUsed,
	"X-Ratelimit-Resource":          slotXResource,
	"X-Ratelimit-Bucket":            slotXBucket,
	"X-Ratelimit-Global":            slotXGlobal,
	"X-Ratelimit-Scope":             slotXScope,
	"X-Ratelimit-Nearlimit":         slotXNear,
	"X-Ratelimit-Interval-Seconds":  slotXInterval,
	"X-Shopify-Shop-Api-Call-Limit": slotShopify,
	"Sforce-Limit-Info":             slotSalesforce,
}

// extFamilies lists the families whose keys carry a variable part, by the
// prefix of their canonical keys. A key's rest starts keep bytes before the
// prefix ends (X's daily caps keep "User-Limit-" or "App-Limit-": it names
// the policy).
var extFamilies = [...]struct {
	prefix string
	fam    family // for X-Ratelimit-, famSuffix or famInfix: see collectExt
	keep   int
}{
	{"X-Ratelimit-", famSuffix, 0},
	{"Anthropic-Ratelimit-", famAnthropic, 0},
	{"X-Ms-Ratelimit-Remaining-", famAzure, 0},
	{"Zendesk-Ratelimit-", famZendesk, 0},
	{"X-Hubspot-Ratelimit-", famHubSpot, 0},
	{"X-User-Limit-", famXDaily, len("User-Limit-")},
	{"X-App-Limit-", famXDaily, len("App-Limit-")},
}

// collectExt files a key of a family whose key has a variable part.
func (f *fields) collectExt(ck string, v []string) {
	var fam family
	var rest string
	for _, e := range extFamilies {
		if strings.HasPrefix(ck, e.prefix) {
			fam, rest = e.fam, ck[len(e.prefix)-e.keep:]
			break
		}
	}
	if fam == famSuffix {
		// X-RateLimit-{Limit,Remaining,Reset}-<unit> or
		// X-RateLimit-<unit>-{Limit,Remaining,Reset}; the exact keys of
		// the family are in slots.
		switch {
		case strings.HasPrefix(rest, "Limit-"), strings.HasPrefix(rest, "Remaining-"), strings.HasPrefix(rest, "Reset-"):
		case strings.HasSuffix(rest, "-Limit"), strings.HasSuffix(rest, "-Remaining"), strings.HasSuffix(rest, "-Reset"):
			fam = famInfix
		default:
			return
		}
	}
	if rest == "" {
		return
	}
	for i := range f.ext[:f.next] {
		if e := &f.ext[i]; e.fam == fam && e.rest == rest {
			e.vals.add(v)
			return
		}
	}
	if f.next < maxExt {
		e := &f.ext[f.next]
		*e = extField{fam: fam, rest: rest}
		e.vals.add(v)
		f.next++
	}
}

// keyStarts is the set of bytes, in either case, that the keys of slots
// and the prefixes of extFamilies start with: collect passes over any other
// key without canonicalizing it, which is most of what it would cost.
// Computed from the two tables, it cannot miss a key they list.
var keyStarts = func() (set [256]bool) {
	mark := func(k string) {
		c := k[0]
		set[c] = true
		if 'A' <= c && c <= 'Z' {
			set[c+'a'-'A'] = true
		}
	}
	for k := range slots {
		mark(k)
	}
	for _, e := range extFamilies {
		mark(e.prefix)
	}
	return set
}()
