package throttle

// STUB: the headers helper replaces this file; the exported shape below is the
// contract Transport relies on.

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Fields tells which of a Policy's numbers the response gave.
type Fields uint8

const (
	HasLimit Fields = 1 << iota
	HasRemaining
	HasWindow
	HasReset
)

// Policy is one limit a response describes: requests per minute, tokens per
// day, a gateway's burst.
type Policy struct {
	Name      string        // the policy's name, "" when the dialect gives none
	Unit      string        // what is counted: "requests" unless the dialect says ("tokens", …)
	Limit     int64         // units allowed per Window
	Remaining int64         // units left in the current window
	Window    time.Duration // the window's length
	Reset     time.Duration // time until the window resets, from the response
	Known     Fields        // which of the numbers above the response gave
}

// Quota is what one response says about the client's rate limit.
type Quota struct {
	Policies      []Policy
	RetryAfter    time.Duration // the server's Retry-After, valid if HasRetryAfter
	HasRetryAfter bool
}

// ParseQuota reads h, the headers of a response received at the local time
// received, into a Quota. Absolute times are measured against h's Date when
// it is valid, else against received.
func ParseQuota(h http.Header, received time.Time) Quota {
	var q Quota
	if v := h.Get("Retry-After"); v != "" {
		if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s >= 0 {
			q.RetryAfter, q.HasRetryAfter = time.Duration(s)*time.Second, true
		} else if t, err := http.ParseTime(v); err == nil {
			now := received
			if d, err := http.ParseTime(h.Get("Date")); err == nil {
				now = d
			}
			q.RetryAfter, q.HasRetryAfter = max(t.Sub(now), 0), true
		}
	}
	return q
}

// Wait reports how long the server asks every caller of the quota to hold
// off: the Retry-After family when present (it wins, even when shorter),
// else the longest reset among exhausted policies, else 0 when quota
// remains. ok is false when the response says nothing either way.
func (q Quota) Wait() (d time.Duration, ok bool) {
	if q.HasRetryAfter {
		return q.RetryAfter, true
	}
	return 0, false
}

// Binding returns the policy that limits the client now: an exhausted one
// if any (the one with the longest reset), else the one with the least
// remaining. ok is false when q has no policy.
func (q Quota) Binding() (p Policy, ok bool) {
	if len(q.Policies) == 0 {
		return Policy{}, false
	}
	return q.Policies[0], true
}
