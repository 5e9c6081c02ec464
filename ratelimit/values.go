package ratelimit

import (
	"strings"
	"time"
)

// maxWait bounds every wait, reset and window read from a response: a longer
// one is treated as absent. No real quota resets more than a year ahead, so
// such a value is a bug or an attack, and a sleep that long is never what the
// caller meant.
const maxWait = 365 * 24 * time.Hour

// Thresholds telling an epoch from a delta where a dialect does not say:
// 1e9 s is September 2001 and 1e12 ms the same instant in milliseconds, while
// a delta that large (31 years) would be over maxWait and absent anyway, so
// the guess never turns a valid delta into an epoch.
const (
	epochSeconds = 1_000_000_000
	epochMillis  = 1_000_000_000_000
)

// clock turns absolute times in a response into durations. Its now is the
// response's own Date when valid and plausible, else the local receive
// time, so a client whose clock is off computes the same waits as one whose
// clock is right. Date is parsed on first use: most dialects send only
// relative values.
type clock struct {
	date     []string // the response's Date field lines
	received time.Time
	now      time.Time
	ready    bool // now is set
	// stated is the instant the last reset read (reset, resetSeconds,
	// httpDate) gave; zero when it gave a delay.
	stated time.Time
}

func (c *clock) at() time.Time {
	if !c.ready {
		c.now, c.ready = c.received, true
		for _, v := range c.date {
			if t, ok := parseHTTPDate(v); ok && c.plausible(t) {
				c.now = t
				break
			}
		}
	}
	return c.now
}

// maxDateSkew bounds how far a response's Date may be from the local
// receive time and still be its clock. Real server clocks are seconds or
// minutes off; a Date days away is broken (a cache replaying a stale
// response, a server with no clock set), and measuring against it would
// turn a short Retry-After date into a long wait, or a spent window into
// no wait at all.
const maxDateSkew = 24 * time.Hour

// plausible reports whether t, a response's Date, is within maxDateSkew of
// the receive time. With no receive time (the zero Time) any Date is.
func (c *clock) plausible(t time.Time) bool {
	if c.received.IsZero() {
		return true
	}
	d := t.Sub(c.received)
	return -maxDateSkew <= d && d <= maxDateSkew
}

// until returns the time from the response's now to t: 0 when t is past, absent beyond
// maxWait. time.Time.Sub saturates, so no input overflows.
func (c *clock) until(t time.Time) (time.Duration, bool) {
	c.stated = t
	d := t.Sub(c.at())
	switch {
	case d < 0:
		return 0, true
	case d > maxWait:
		return 0, false
	}
	return d, true
}

// trimOWS removes the optional white space (space and horizontal tab) that
// RFC 9110 §5.6.3 allows around a field value.
func trimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// parseUint reads ASCII digits only: no sign, no space inside, no hex, no
// exponent, no fullwidth digits (strconv.ParseInt would take "+30"). It
// fails on overflow.
func parseUint(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := int64(c - '0')
		if n > (1<<63-1-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// parseDecimal reads "digits" or "digits.digits" (Shopify's "2.0", Discord's
// "1.234", Reddit's "598.0") into a whole part and a fraction in units of
// 1e-9, without floating point: no NaN, no exponent, no rounding surprises.
// Fraction digits past the ninth are checked but dropped.
func parseDecimal(s string) (whole, nano int64, ok bool) {
	s = trimOWS(s)
	i := strings.IndexByte(s, '.')
	if i < 0 {
		whole, ok = parseUint(s)
		return whole, 0, ok
	}
	whole, ok = parseUint(s[:i])
	frac := s[i+1:]
	if !ok || frac == "" {
		return 0, 0, false
	}
	scale := int64(100_000_000)
	for j := 0; j < len(frac); j++ {
		c := frac[j]
		if c < '0' || c > '9' {
			return 0, 0, false
		}
		nano += int64(c-'0') * scale
		scale /= 10
	}
	return whole, nano, true
}

// parseCount reads a limit or a remaining count. A fraction (Reddit sends
// "598.0") is dropped: rounding down is the conservative way.
func parseCount(s string) (int64, bool) {
	n, _, ok := parseDecimal(s)
	return n, ok
}

// seconds converts a decimal number of seconds to a duration, absent beyond
// maxWait.
func seconds(whole, nano int64) (time.Duration, bool) {
	if whole > int64(maxWait/time.Second) {
		return 0, false
	}
	d := time.Duration(whole)*time.Second + time.Duration(nano)
	return d, d <= maxWait
}

// millis converts a decimal number of milliseconds to a duration, absent
// beyond maxWait.
func millis(whole, nano int64) (time.Duration, bool) {
	if whole > int64(maxWait/time.Millisecond) {
		return 0, false
	}
	d := time.Duration(whole)*time.Millisecond + time.Duration(nano/1e3)
	return d, d <= maxWait
}

// resetKind is how a dialect spells the time until its quota resets.
type resetKind uint8

const (
	// resetAuto: a number is epoch ms, epoch s or delta s by its size; else
	// an RFC 3339 / ISO 8601 time; else an HTTP-date.
	resetAuto resetKind = iota
	// resetDuration: a Go-style duration ("6m0s", "12ms", "2m59.56s") as
	// OpenAI and Groq send, or a number read as resetAuto does.
	resetDuration
	// resetRFC3339: an RFC 3339 time, as Anthropic sends.
	resetRFC3339
	// resetEpoch: epoch seconds, as X documents its x-*-limit-24hour-reset;
	// never guessed to be a delta.
	resetEpoch
)

// reset reads the time until a quota resets from one field value.
func (c *clock) reset(v string, kind resetKind) (time.Duration, bool) {
	c.stated = time.Time{}
	v = trimOWS(v)
	if v == "" {
		return 0, false
	}
	if whole, nano, ok := parseDecimal(v); ok {
		switch {
		case kind == resetEpoch:
			return c.until(time.Unix(whole, nano))
		case whole >= epochMillis:
			return c.until(time.UnixMilli(whole))
		case whole >= epochSeconds:
			return c.until(time.Unix(whole, nano))
		}
		return seconds(whole, nano)
	}
	switch kind {
	case resetDuration:
		return goDuration(v)
	case resetRFC3339:
		return c.isoTime(v)
	case resetEpoch:
		return 0, false
	}
	if d, ok := c.isoTime(v); ok {
		return d, true
	}
	return c.httpDate(v)
}

// goDuration reads a duration as Go's time.Duration.String writes it, which
// is what OpenAI's x-ratelimit-reset-* headers carry
// (https://platform.openai.com/docs/guides/rate-limits). A sign is refused:
// time.ParseDuration would take "-1s" and "+1s".
func goDuration(v string) (time.Duration, bool) {
	if v == "" || v[0] < '0' || v[0] > '9' {
		return 0, false
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d > maxWait {
		return 0, false
	}
	return d, true
}

// isoTime reads an RFC 3339 time (Anthropic) or the ISO 8601 form without
// seconds some gateways send, measured against c.
func (c *clock) isoTime(v string) (time.Duration, bool) {
	// Only something shaped like 2006-01-02T… is tried: time.Parse
	// allocates an error for every miss.
	if len(v) < 16 || v[4] != '-' || (v[10] != 'T' && v[10] != 't') {
		return 0, false
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		if t, err = time.Parse("2006-01-02T15:04Z07:00", v); err != nil {
			return 0, false
		}
	}
	return c.until(t)
}

// httpDate reads an HTTP-date in any of the three forms RFC 9110 §5.6.7
// requires recipients to accept: IMF-fixdate, RFC 850 and asctime.
func (c *clock) httpDate(v string) (time.Duration, bool) {
	c.stated = time.Time{}
	t, ok := parseHTTPDate(v)
	if !ok {
		return 0, false
	}
	return c.until(t)
}

// lowerASCII lower-cases a short name from a header key, without allocating
// for the names real APIs send.
func lowerASCII(s string) string {
	switch s {
	case "Requests":
		return "requests"
	case "Tokens":
		return "tokens"
	case "Input-Tokens":
		return "input-tokens"
	case "Output-Tokens":
		return "output-tokens"
	case "Complexity":
		return "complexity"
	}
	return strings.ToLower(s)
}
