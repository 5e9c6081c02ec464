package ratelimit

import "slices"

// Byte budgets bound what one response can cost Parse. They are
// checked after the fields are gathered and before any of them is parsed,
// so a hostile field (net/http accepts up to 10 MB of response headers)
// costs no more than looking at the lengths of its lines: a field over its
// budget is never handed to a parser, Structured Field or other.
//
// Real rate-limit fields are tens of bytes; even a RateLimit-Policy naming
// 64 policies (the most one response yields) with their parameters fits in
// a few KiB.
const (
	// maxFieldBytes bounds one field: the lines of every key that
	// canonicalizes to its name, each counted as lineCost. A field over it
	// is absent, as a malformed one is.
	maxFieldBytes = 8 << 10
	// maxResponseBytes bounds the fields of one response taken together.
	// Fields are admitted in a fixed order, the Retry-After family and
	// Date first, then the IETF fields, X-RateLimit-* and the vendor
	// dialects; a field that does not fit in what is left is absent.
	maxResponseBytes = 32 << 10
	// maxKeyBytes bounds a key worth canonicalizing: every key read is
	// far shorter, and canonicalizing a longer one would copy it.
	maxKeyBytes = 128
)

// lines is one header field as Parse reads it: the field lines of
// every key in the map that canonicalizes to its name.
type lines struct {
	v    []string
	size int  // bytes charged for every line offered, kept or not; see lineCost
	own  bool // v is the parser's copy (several keys merged), not a slice of the header map
}

// lineCost is what a field line is charged: its bytes, and two for the ", "
// that joins it to the next when the lines are read as one list, so that a
// million empty lines are not free.
func lineCost(s string) int { return len(s) + 2 }

// add appends the lines v of one key. Merging keys that differ only in case
// costs time linear in their number: v is appended, not sorted in (sort
// sorts once). Once the field is over maxFieldBytes its lines are dropped
// and the rest only counted; the outcome depends on the total alone, so
// the map's random order cannot change it.
func (l *lines) add(v []string) {
	for _, s := range v {
		l.size += lineCost(s)
	}
	switch {
	case l.size > maxFieldBytes:
		l.v, l.own = nil, false
	case l.v == nil:
		l.v = v // the map's own slice: read only, never appended to
	default:
		if !l.own {
			l.v, l.own = append(make([]string, 0, len(l.v)+len(v)), l.v...), true
		}
		l.v = append(l.v, v...)
	}
}

// fit sorts merged lines, whose order came from the map's random one,
// and charges the field against the response's budget left, dropping it
// when it does not fit.
func (l *lines) fit(left *int) {
	if l.v == nil {
		return
	}
	if l.size > *left {
		l.v, l.own = nil, false
		return
	}
	*left -= l.size
	if l.own {
		slices.Sort(l.v)
	}
}

// budget applies maxResponseBytes to the fields gathered, in the order of
// their slots, then the variable-key families in their sorted order.
func (f *fields) budget() {
	left := maxResponseBytes
	for i := range f.slot {
		f.slot[i].fit(&left)
	}
	for i := range f.ext[:f.next] {
		f.ext[i].vals.fit(&left)
	}
}
