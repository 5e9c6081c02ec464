package ratelimit

import (
	"strings"
)

// Helpers of the dialects whose keys carry a unit, a window or a name.

// readExt calls read for each of v's variable-key fields, with the number
// of policies before the first: a dialect's policies are found by name and
// unit among its own.
func (q *Reading) readExt(v view, read func(e *extField, from int)) {
	from := len(q.Policies)
	ext := v.ext()
	for i := range ext {
		read(&ext[i], from)
	}
}

// The three numbers a per-unit field gives.
const (
	fieldLimit = iota + 1
	fieldRemaining
	fieldReset
)

func fieldOf(s string) int {
	switch s {
	case "Limit":
		return fieldLimit
	case "Remaining":
		return fieldRemaining
	case "Reset":
		return fieldReset
	}
	return 0
}

// readNumbers applies every value of one field to the policy (name, unit).
func (q *Reading) readNumbers(c *clock, vals []string, field int, kind resetKind, from int, name, unit string) {
	if field == 0 || unit == "" {
		return
	}
	for _, v := range vals {
		switch field {
		case fieldLimit:
			if n, ok := parseCount(v); ok {
				q.policy(from, name, unit).setLimit(n)
			}
		case fieldRemaining:
			if n, ok := parseCount(v); ok {
				q.policy(from, name, unit).setRemaining(n)
			}
		case fieldReset:
			if d, ok := c.reset(v, kind); ok {
				q.policy(from, name, unit).setResetAt(d, c.stated)
			}
		}
	}
}

// splitAny yields the substrings of s between any of the bytes in seps,
// as strings.SplitSeq does for one separator.
func splitAny(s, seps string) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		for {
			i := strings.IndexAny(s, seps)
			if i < 0 {
				yield(s)
				return
			}
			if !yield(s[:i]) {
				return
			}
			s = s[i+1:]
		}
	}
}

// usedOf reads "used/limit".
func usedOf(v string) (used, limit int64, ok bool) {
	u, l, found := strings.Cut(v, "/")
	if !found {
		return 0, 0, false
	}
	used, ok1 := parseUint(trimOWS(u))
	limit, ok2 := parseUint(trimOWS(l))
	return used, limit, ok1 && ok2
}
