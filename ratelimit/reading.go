package ratelimit

import (
	"net/http"
	"sync"
	"time"
)

// Policy is one limit a response describes: requests per minute, tokens per
// day, a gateway's burst. Its zero value describes nothing. A Policy is a
// plain value, safe to copy and to read concurrently.
//
// Each number has a Has bool beside it: a number the response did not
// give, or gave in a form that is not valid, is absent, its Has is false
// and the number is 0. Absent never means 0.
//
// Durations are relative to the response: an absolute reset time in the
// response has already been turned into a duration against the response's
// own Date header (see [Parse]).
type Policy struct {
	// Name is the policy's name in the response: the IETF policy name,
	// GitHub's resource ("core"), Discord's bucket, Azure's and Zendesk's
	// limit name, Kong's window ("minute"). "" when the dialect gives none.
	Name string
	// Unit is what is counted: "requests" unless the dialect says ("tokens",
	// "input-tokens", "complexity", the IETF qu parameter, …).
	Unit string
	// Partition is the IETF partition key (the pk parameter), as the raw
	// bytes the server sent; "" when none.
	Partition string
	// Scope is who shares the quota when the server says: Discord's
	// X-RateLimit-Scope ("user", "shared", "global"; "global" also when
	// X-RateLimit-Global is true). "" when the server does not say.
	Scope string

	Limit     int64         // units allowed per Window: a count, not a rate
	Remaining int64         // units left in the current window, ≥ 0
	Window    time.Duration // the window's length
	Reset     time.Duration // time until the window resets, from the response
	// ResetAt is the reset as the response stated it when it gave an
	// instant (an epoch or a date) rather than a delay: on the server's
	// clock, and the same instant in every response of one window,
	// whatever their Dates (Reset is it measured against the response's
	// Date, a whole second, so up to a second long). Zero for a delay.
	ResetAt time.Time

	// Which of the four numbers above the response gave.
	HasLimit, HasRemaining, HasWindow, HasReset bool

	// Refills: the limit is a bucket that refills continuously, Limit
	// units per Window, and Reset is the time until it is full again, not
	// the end of a window (OpenAI, Groq, Anthropic). Units free one every
	// Window/Limit long before Reset. Where the response does not give
	// the Window, the dialect tells it from the numbers when they allow a
	// standard length (a second, a minute, an hour, a day).
	Refills bool
	// Depth is the units a bucket deeper than its Limit holds, as this
	// response says (its Remaining), when Remaining is more than Limit
	// (tollbooth: Limit is x/time/rate's rate a Window, its burst
	// deeper); 0 otherwise. Such a policy Refills: no window of Limit
	// units holds more than Limit.
	Depth int64
}

// Exhausted reports whether the response says no unit of p remains.
func (p Policy) Exhausted() bool {
	return p.HasRemaining && p.Remaining == 0
}

// Reading is what one response says about the client's rate limits: every
// policy it describes, and the wait it imposes. Its zero value says nothing.
// A Reading is a plain value, safe to copy and to read concurrently.
type Reading struct {
	// Policies are the limits the response describes, in a stable order:
	// the IETF fields first, then X-RateLimit-*, then vendor dialects.
	Policies []Policy
	// RetryAfter is the Retry-After family's wait (Retry-After,
	// retry-after-ms, x-ms-retry-after-ms; the longest when several are
	// given), valid if HasRetryAfter.
	RetryAfter    time.Duration
	HasRetryAfter bool
	// NearLimit is set when the server warns that the quota is nearly
	// spent without giving numbers (Atlassian's X-RateLimit-NearLimit).
	NearLimit bool
	// Global is set when the server says the limit hit is the client's
	// global one rather than the route's (Discord's X-RateLimit-Global:
	// true or X-RateLimit-Scope: global): a caller keeping quotas per
	// route should hold off every route.
	Global bool
	// ShouldRetry is the server's own word on whether the request may be
	// retried (OpenAI's and Anthropic's x-should-retry: true or false),
	// valid if HasShouldRetry. See [Reading.Permanent].
	ShouldRetry    bool
	HasShouldRetry bool
}

// Parse reads h, the headers of a response received at the local time
// received, into a Reading. It reads every dialect in use: Retry-After and its
// millisecond forms, x-should-retry, every generation of the IETF RateLimit
// fields, the X-RateLimit-* family and the vendor dialects (OpenAI,
// Anthropic, Azure, Shopify, Salesforce, HubSpot, Zendesk, Kong, Linear,
// X's daily caps, …).
//
// Absolute times (HTTP-dates, RFC 3339 times, epoch seconds or
// milliseconds) are measured against h's Date when it is valid and within a
// day of received, else against received (a Date further off is broken,
// not skew); relative values ignore clocks; a time in the past means 0.
// Where a dialect does not say whether a number is an epoch or a delta, a
// value of at least 1e12 is epoch milliseconds, at least 1e9 epoch seconds,
// anything less delta seconds; fields defined as delays (Retry-After, the
// IETF t parameter and draft-07 reset) and as epochs are never guessed.
// retry-after-ms wins over a Retry-After that is its rounding.
//
// Invalid values are absent, never 0: negative, non-decimal, empty or
// overflowing numbers, Structured Fields of the wrong type (a malformed
// Structured Field is ignored whole, the other fields kept), and any wait or
// reset over a year. A count sent with a fraction (Reddit's "598.0") is
// rounded down. A field given more than once keeps its most conservative
// value: the least remaining, the longest wait. One response yields at most
// 64 policies.
//
// Cost is bounded before anything is parsed: a field whose lines come to
// more than 8 KiB is absent, and so is any field past 32 KiB of the fields
// read in one response (Date and the Retry-After family are counted first).
// A 10 MB header costs about what looking at its length does.
//
// Parse never panics and does not modify h. Keys are matched in any
// case, though keys in canonical form (as net/http delivers them) are the
// cheapest; many keys differing only in case cost time linear in their
// number.
func Parse(h http.Header, received time.Time) Reading {
	st := states.Get().(*state)
	f, c, r := &st.f, &st.c, &st.r
	if !f.collect(h) {
		// No field of any dialect (a Date at most): nothing to read,
		// and nothing to reset but the Date.
		f.slot[slotDate] = lines{}
		states.Put(st)
		return Reading{}
	}
	*c = clock{date: f.vals(slotDate), received: received}
	f.readAll(r, c)
	r.tidy()
	q := *r
	st.reset()
	states.Put(st)
	return q
}

// state is what one Parse works on. The dialects are called through their
// registry, so escape analysis cannot keep it on the stack; a pool keeps
// the few KiB of fields from being allocated for every response (the one
// allocation of a Parse is the Policies it returns).
type state struct {
	f fields
	c clock
	r Reading
}

var states = sync.Pool{New: func() any { return new(state) }}

// reset drops every reference the state holds to the last response.
func (st *state) reset() {
	clear(st.f.slot[:])
	clear(st.f.ext[:st.f.next])
	st.f.next = 0
	st.c = clock{}
	st.r = Reading{}
}

// Wait reports how long the server asks every caller of the quota to hold
// off. The Retry-After family wins when present, even when shorter than a
// reset: draft-ietf-httpapi-ratelimit-headers says a client MUST prefer it.
// Else the longest reset among exhausted policies, where the reset of a
// bucket that [Policy.Refills] is the time it takes to free one unit
// (Window/Limit, at most its Reset) when its Window is known, not the time
// until it is full; else 0 when quota remains. ok is false when the response says nothing either way, or when
// a policy is exhausted but no exhausted policy says when it resets.
func (q Reading) Wait() (d time.Duration, ok bool) {
	if q.HasRetryAfter {
		return q.RetryAfter, true
	}
	exhausted, remains := false, false
	for _, p := range q.Policies {
		switch {
		case p.Exhausted():
			exhausted = true
			r, has := p.Reset, p.HasReset
			if u, known := p.unitTime(); known {
				r, has = u, true
			}
			if has && (!ok || r > d) {
				d, ok = r, true
			}
		case p.HasRemaining:
			remains = true
		}
	}
	if exhausted {
		return d, ok
	}
	return 0, remains
}

// Binding returns the policy that limits the client now: an exhausted one
// if any (the one with the longest known reset), else the one with the
// least remaining in absolute units, else the first. Ties go to the earlier
// policy. ok is false when q has no policy.
func (q Reading) Binding() (p Policy, ok bool) {
	best := -1
	for i, c := range q.Policies {
		if best < 0 {
			best = i
			continue
		}
		if bindsBefore(c, q.Policies[best]) {
			best = i
		}
	}
	if best < 0 {
		return Policy{}, false
	}
	return q.Policies[best], true
}

// bindsBefore reports whether a limits the client more than b.
func bindsBefore(a, b Policy) bool {
	switch ae, be := a.Exhausted(), b.Exhausted(); {
	case ae != be:
		return ae
	case ae:
		ar, br := a.HasReset, b.HasReset
		return ar && (!br || a.Reset > b.Reset)
	}
	ar, br := a.HasRemaining, b.HasRemaining
	return ar && (!br || a.Remaining < b.Remaining)
}

// policy returns the policy named name counting unit among q.Policies[from:],
// appending it when missing. The pointer is valid until the next append.
func (q *Reading) policy(from int, name, unit string) *Policy {
	for i := from; i < len(q.Policies); i++ {
		if p := &q.Policies[i]; p.Name == name && p.Unit == unit {
			return p
		}
	}
	if !q.room() {
		return new(Policy) // read and dropped: see maxPolicies
	}
	if q.Policies == nil {
		q.Policies = make([]Policy, 0, 4)
	}
	q.Policies = append(q.Policies, Policy{Name: name, Unit: unit})
	return &q.Policies[len(q.Policies)-1]
}

// maxPolicies bounds the policies one response yields. Real responses carry
// a handful; the bound keeps a hostile one (a field listing a million
// policies) from costing a million appends and quadratic lookups.
const maxPolicies = 64

func (q *Reading) room() bool { return len(q.Policies) < maxPolicies }

// add appends p unless the response already gave maxPolicies.
func (q *Reading) add(p Policy) {
	if q.room() {
		q.Policies = append(q.Policies, p)
	}
}

// The setters keep the most conservative value when a number is given more
// than once: the least limit and remaining, the longest reset and window.

func (p *Policy) setLimit(n int64) {
	if !p.HasLimit || n < p.Limit {
		p.Limit = n
	}
	p.HasLimit = true
}

func (p *Policy) setRemaining(n int64) {
	if !p.HasRemaining || n < p.Remaining {
		p.Remaining = n
	}
	p.HasRemaining = true
}

func (p *Policy) setWindow(d time.Duration) {
	if !p.HasWindow || d > p.Window {
		p.Window = d
	}
	p.HasWindow = true
}

func (p *Policy) setReset(d time.Duration) {
	p.setResetAt(d, time.Time{})
}

// setResetAt sets the reset d, stated as the instant at (zero for a
// delay): the longest of a policy's resets wins, with its instant.
func (p *Policy) setResetAt(d time.Duration, at time.Time) {
	if !p.HasReset || d > p.Reset {
		p.Reset, p.ResetAt = d, at
	}
	p.HasReset = true
}

// tidy drops policies that carry no number and exact duplicates (Zendesk,
// for one, sends the same limit as X-Rate-Limit and as RateLimit-Limit).
func (q *Reading) tidy() {
	out := q.Policies[:0]
	for _, p := range q.Policies {
		if !(p.HasLimit || p.HasRemaining || p.HasWindow || p.HasReset) || contains(out, p) {
			continue
		}
		if p.HasLimit && p.HasRemaining && p.Limit > 0 && p.Remaining > p.Limit {
			p.Refills, p.Depth = true, p.Remaining
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		out = nil
	}
	q.Policies = out
}

func contains(ps []Policy, p Policy) bool {
	for _, x := range ps {
		if x == p {
			return true
		}
	}
	return false
}
