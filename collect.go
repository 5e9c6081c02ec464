package throttle

import (
	"net/http"
	"net/textproto"
	"slices"
	"strings"
)

// fields holds the values of the header fields ParseQuota reads, gathered
// in one pass over the header map so that each key is canonicalized once
// and most lookups cost a switch, not a map probe per dialect. Every key of
// the map is offered to slot and collectExt, whatever its first letter:
// those two functions are the only list of the keys read, so a dialect
// added there is read, with nothing else to keep in step.
type fields struct {
	date lines

	retryAfter, retryAfterMS, msRetryAfterMS, shouldRetry lines

	// IETF draft-ietf-httpapi-ratelimit-headers, every generation.
	rateLimit, rlPolicy, rlLimit, rlRemaining, rlReset, rlResetTime lines

	// X-RateLimit-* and X-Rate-Limit-*.
	xLimit, xRemaining, xReset, xResetAfter, xUsed        lines
	xResource, xBucket, xGlobal, xScope, xNear, xInterval lines

	shopify, salesforce lines

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
		if len(v) == 0 || k == "" || len(k) > maxKeyBytes {
			continue
		}
		ck := textproto.CanonicalMIMEHeaderKey(k)
		if l := f.slot(ck); l != nil {
			l.add(v)
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

func (f *fields) slot(ck string) *lines {
	switch ck {
	case "Date":
		return &f.date
	case "Retry-After":
		return &f.retryAfter
	case "Retry-After-Ms":
		return &f.retryAfterMS
	case "X-Ms-Retry-After-Ms":
		return &f.msRetryAfterMS
	case "X-Should-Retry":
		return &f.shouldRetry
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
	case strings.HasPrefix(ck, "X-User-Limit-"), strings.HasPrefix(ck, "X-App-Limit-"):
		// The whole key is kept: its who (User, App) names the policy.
		fam, rest = famXDaily, ck[len("X-"):]
	default:
		return
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
