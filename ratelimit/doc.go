// Package ratelimit reads what an HTTP response's headers say about the
// client's rate limits, in every dialect real APIs send: [Parse] turns a
// response's headers into a [Reading], its policies (limit, remaining,
// window, time to reset, by name and unit) and the wait it imposes.
//
//	r := ratelimit.Parse(resp.Header, time.Now())
//	if d, ok := r.Wait(); ok && d > 0 {
//		// the server asks every caller of this quota to hold off for d
//	}
//
// It is the package [github.com/throttle-go/throttle]'s Transport reads
// every response with, and has no dependency on it: use it on its own
// wherever rate-limit headers are parsed.
//
// # Dialects
//
// Each dialect is a file of this package:
//
//   - retryafter.go: Retry-After (delta-seconds, decimals, the three
//     HTTP-date forms), retry-after-ms and x-ms-retry-after-ms.
//   - shouldretry.go: x-should-retry (OpenAI, Anthropic).
//   - ietf.go: the IETF RateLimit and RateLimit-Policy fields
//     (draft-ietf-httpapi-ratelimit-headers), every generation still served,
//     and the RateLimit-Limit/-Remaining/-Reset trio (GitLab, Docker Hub).
//   - xratelimit.go: X-RateLimit-* and X-Rate-Limit-* (GitHub, X, Okta,
//     SendGrid, Envoy, Discord, Reddit, Atlassian, Zendesk).
//   - kong.go, openai.go (and Groq), linear.go: X-RateLimit-* keys that
//     carry a window or a unit.
//   - anthropic.go, azure.go, zendesk.go, hubspot.go, xapi.go (X API v2's
//     daily caps), shopify.go, salesforce.go.
//
// # Absent values
//
// A value the response did not give, or gave in a form that is not valid,
// is absent, never 0: each optional value has a Has bool beside it
// ([Policy].HasLimit, [Reading].HasRetryAfter), and functions that may
// find nothing return ok. Negative, signed, hex, NaN, overflowing numbers
// and any wait over a year are absent; a malformed Structured Field is
// ignored whole.
//
// # Times
//
// Durations are relative to the response. Absolute times are measured
// against the response's own Date (when within a day of the receive time),
// so a client whose clock is off computes the same waits. Where a dialect
// does not say whether a number is an epoch or a delta, its size decides;
// fields defined as delays or as epochs are never guessed.
//
// # Cost
//
// Cost is bounded before anything is parsed: a field over 8 KiB, or past
// 32 KiB of the fields read in one response, is absent, so a 10 MB header
// costs about what looking at its length does. Parse never panics and does
// not modify its input.
package ratelimit
