package throttle

import (
	"net/http"
	"net/textproto"
	"slices"
	"strings"
)

// fields holds the values of the header fields ParseQuota reads, gathered
// in one pass over the header map so that each key is canonicalized once
// and most lookups cost a switch, not a map probe per dialect.
type fields struct {
	date []string

	retryAfter, retryAfterMS, msRetryAfterMS []string

	// IETF draft-ietf-httpapi-ratelimit-headers, every generation.
	rateLimit, rlPolicy, rlLimit, rlRemaining, rlReset, rlResetTime []string

	// X-RateLimit-* and X-Rate-Limit-*.
	xLimit, xRemaining, xReset, xResetAfter, xUsed        []string
	xResource, xBucket, xGlobal, xScope, xNear, xInterval []string

	shopify, salesforce []string

	// Families whose key carries a variable part (a unit, a window, a
	// name). Bounded: a response with more such keys than fit is read in
	// part, never without bound.
	ext  [maxExt]extField
	next int
}

const maxExt = 32

type family uint8

const (
	famSuffix    family = iota // X-RateLimit-{Limit,Remaining,Reset}-<unit or window> (OpenAI, Groq, Kong)
	famInfix                   // X-RateLimit-<unit>-{Limit,Remaining,Reset} (Linear)
	famAnthropic               // anthropic-ratelimit-<unit>-{limit,remaining,reset}
	famAzure                   // x-ms-ratelimit-remaining-<name>
	famZendesk                 // Zendesk-RateLimit-<name>
	famHubSpot                 // X-HubSpot-RateLimit-*
)

// extField is one field of a family with a variable key.
type extField struct {
	fam  family
	rest string // the key after the family's prefix, canonical case
	vals []string
}

// collect sorts h's fields into f. Keys are canonicalized, which costs no
// allocation for keys already canonical (textproto returns them as is).
func (f *fields) collect(h http.Header) {
	for k, v := range h {
		if len(v) == 0 || k == "" {
			continue
		}
		// Every key read starts with one of these letters; skipping the
		// others early spares canonicalizing Content-Type and friends.
		switch k[0] | 0x20 {
		case 'a', 'd', 'r', 's', 'x', 'z':
		default:
			continue
		}
		ck := textproto.CanonicalMIMEHeaderKey(k)
		if slot := f.slot(ck); slot != nil {
			add(slot, v)
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
}

// add appends v to *slot, copying rather than writing into the header
// map's arrays when two keys (say "ratelimit" and "RateLimit") fill one
// slot. The merged lines are sorted: the map's order is random, and the
// result must not be.
func add(slot *[]string, v []string) {
	if *slot == nil {
		*slot = v
		return
	}
	*slot = append(slices.Clip(*slot), v...)
	slices.Sort(*slot)
}

func (f *fields) slot(ck string) *[]string {
	switch ck {
	case "Date":
		return &f.date
	case "Retry-After":
		return &f.retryAfter
	case "Retry-After-Ms":
		return &f.retryAfterMS
	case "X-Ms-Retry-After-Ms":
		return &f.msRetryAfterMS
	case "Ratelimit":
		return &f.rateLimit
	case "Ratelimit-Policy":
		return &f.rlPolicy
	case "Ratelimit-Limit":
		return &f.rlLimit
	case "Ratelimit-Remaining":
		return &f.rlRemaining
	case "Ratelimit-Reset":
		return &f.rlReset
	case "Ratelimit-Resettime":
		return &f.rlResetTime
	// X (https://docs.x.com/x-api/fundamentals/rate-limits) and Okta
	// spell the family X-Rate-Limit-*; Zendesk sends its limit as
	// X-Rate-Limit.
	case "X-Ratelimit-Limit", "X-Rate-Limit-Limit", "X-Rate-Limit":
		return &f.xLimit
	case "X-Ratelimit-Remaining", "X-Rate-Limit-Remaining":
		return &f.xRemaining
	case "X-Ratelimit-Reset", "X-Rate-Limit-Reset":
		return &f.xReset
	case "X-Ratelimit-Reset-After":
		return &f.xResetAfter
	case "X-Ratelimit-Used":
		return &f.xUsed
	case "X-Ratelimit-Resource":
		return &f.xResource
	case "X-Ratelimit-Bucket":
		return &f.xBucket
	case "X-Ratelimit-Global":
		return &f.xGlobal
	case "X-Ratelimit-Scope":
		return &f.xScope
	case "X-Ratelimit-Nearlimit":
		return &f.xNear
	case "X-Ratelimit-Interval-Seconds":
		return &f.xInterval
	case "X-Shopify-Shop-Api-Call-Limit":
		return &f.shopify
	case "Sforce-Limit-Info":
		return &f.salesforce
	}
	return nil
}

// collectExt files a key of a family whose key has a variable part.
func (f *fields) collectExt(ck string, v []string) {
	var fam family
	var rest string
	switch {
	case strings.HasPrefix(ck, "X-Ratelimit-"):
		rest = ck[len("X-Ratelimit-"):]
		switch {
		case strings.HasPrefix(rest, "Limit-"), strings.HasPrefix(rest, "Remaining-"), strings.HasPrefix(rest, "Reset-"):
			fam = famSuffix
		case strings.HasSuffix(rest, "-Limit"), strings.HasSuffix(rest, "-Remaining"), strings.HasSuffix(rest, "-Reset"):
			fam = famInfix
		default:
			return
		}
	case strings.HasPrefix(ck, "Anthropic-Ratelimit-"):
		fam, rest = famAnthropic, ck[len("Anthropic-Ratelimit-"):]
	case strings.HasPrefix(ck, "X-Ms-Ratelimit-Remaining-"):
		fam, rest = famAzure, ck[len("X-Ms-Ratelimit-Remaining-"):]
	case strings.HasPrefix(ck, "Zendesk-Ratelimit-"):
		fam, rest = famZendesk, ck[len("Zendesk-Ratelimit-"):]
	case strings.HasPrefix(ck, "X-Hubspot-Ratelimit-"):
		fam, rest = famHubSpot, ck[len("X-Hubspot-Ratelimit-"):]
	default:
		return
	}
	if rest == "" {
		return
	}
	for i := range f.ext[:f.next] {
		if e := &f.ext[i]; e.fam == fam && e.rest == rest {
			add(&e.vals, v)
			return
		}
	}
	if f.next < maxExt {
		f.ext[f.next] = extField{fam, rest, v}
		f.next++
	}
}
