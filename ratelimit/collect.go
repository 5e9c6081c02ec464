package ratelimit

import (
	"net/http"
	"net/textproto"
	"slices"
	"strings"
	"sync"
)

// fields holds the values of the header fields Parse reads, gathered in
// one pass over the header map so that each key is canonicalized once and
// looked up once, not probed for per dialect. Which keys are read is the
// dialects' own word (see dialect): nothing here lists a key.
type fields struct {
	slot [maxSlots]lines // the fields read whole, by slot

	// Families whose key carries a variable part (a unit, a window, a
	// name). Bounded: a response with more such keys than fit is read in
	// part, never without bound.
	ext  [maxExt]extField
	next int
}

// maxSlots bounds the fields read whole, Date included, of every dialect
// together; TestRegistryFits checks that the dialects fit.
const maxSlots = 40

// maxExt bounds the variable-key fields one response yields.
const maxExt = 32

// slot numbers a field read whole, in the order the response's budget
// admits fields: Date, then each dialect's fields in rank order.
type slot uint8

// slotDate is the response's Date, which every dialect's absolute times
// are measured against (see clock).
const slotDate slot = 0

// vals returns the lines of the field in slot s.
func (f *fields) vals(s slot) []string { return f.slot[s].v }

// extField is one field of a family with a variable key.
type extField struct {
	d    uint8  // the dialect, its position in the index
	rest string // the key after the family's prefix, canonical case
	vals lines
}

// A dialect is one family of rate-limit header fields: the keys it reads
// and how it reads them into a Reading. Each dialect's file registers its
// own (var _ = register(…)), and nothing else names a key: the collector's
// key index, its quick filter on a key's first byte and the order of the
// response's byte budget are all computed from the dialects registered.
// Adding a dialect is adding a file.
type dialect struct {
	// name is the dialect's name in tests and messages.
	name string
	// rank orders the dialects: their fields are admitted to the
	// response's budget, and read, in increasing rank, so policies come
	// out in a stable order (the IETF fields first, then X-RateLimit-*,
	// then the vendor dialects). The ranks are the rank* constants below.
	rank int
	// keys maps each key the dialect reads whole, in canonical form
	// (textproto.CanonicalMIMEHeaderKey), to its own field number: 0, 1,
	// …; several keys may fill one field (X-RateLimit-Limit and
	// X-Rate-Limit-Limit).
	keys map[string]int
	// families are the keys with a variable part, by prefix.
	families []family
	// read reads the dialect's fields from v into r.
	read func(r *Reading, c *clock, v view)
}

// family is a set of keys sharing a canonical prefix: the key's rest (what
// follows the prefix) carries a unit, a window or a name.
type family struct {
	prefix string
	// keep is how many bytes before the prefix's end the rest keeps
	// (X's daily caps keep "User-Limit-" or "App-Limit-": it names the
	// policy).
	keep int
	// accept, if not nil, says whether the family reads a key with this
	// rest; a key no family accepts is not read. Families sharing a
	// prefix are tried in rank order.
	accept func(rest string) bool
}

// The dialects' ranks.
const (
	rankRetryAfter = 10 * (iota + 1)
	rankShouldRetry
	rankIETF
	rankXRateLimit
	rankKong
	rankOpenAI
	rankLinear
	rankAnthropic
	rankAzure
	rankZendesk
	rankHubSpot
	rankXAPI
	rankShopify
	rankSalesforce
)

// registry holds every dialect registered, in no order. It is complete
// once the package is initialized; the index is built from it at the
// first Parse.
var registry []*dialect

// register adds d to the registry; its result is for var _ = register(…).
func register(d *dialect) *dialect {
	registry = append(registry, d)
	return d
}

// view is one dialect's part of the fields of a response.
type view struct {
	f    *fields
	base slot  // the slot of the dialect's field 0
	d    uint8 // the dialect's position in the index
}

// vals returns the lines of the dialect's field i.
func (v view) vals(i int) []string { return v.f.vals(v.base + slot(i)) }

// ext returns the dialect's variable-key fields, sorted by their rest.
func (v view) ext() []extField {
	all := v.f.ext[:v.f.next]
	i := 0
	for i < len(all) && all[i].d < v.d {
		i++
	}
	j := i
	for j < len(all) && all[j].d == v.d {
		j++
	}
	return all[i:j]
}

// index is the registry made ready to read responses with.
type index struct {
	dialects []*dialect // by rank
	base     []slot     // the first slot of each dialect
	slots    map[string]slot
	families []indexedFamily // by rank of their dialect
	starts   [256]bool       // the bytes, in either case, keys start with
	nslots   int
}

type indexedFamily struct {
	family
	d uint8
}

// keyIndex returns the index, built at the first call.
var keyIndex = sync.OnceValue(func() *index { return buildIndex(registry) })

// buildIndex sorts the dialects by rank and numbers their fields. A key
// claimed twice keeps its first owner, and fields past maxSlots are not
// read; TestRegistry fails on either.
func buildIndex(reg []*dialect) *index {
	x := &index{slots: map[string]slot{"Date": slotDate}, nslots: 1}
	x.dialects = slices.Clone(reg)
	slices.SortStableFunc(x.dialects, func(a, b *dialect) int { return a.rank - b.rank })
	mark := func(k string) {
		c := k[0]
		x.starts[c] = true
		if 'A' <= c && c <= 'Z' {
			x.starts[c+'a'-'A'] = true
		}
	}
	mark("Date")
	for i, d := range x.dialects {
		base := slot(x.nslots)
		x.base = append(x.base, base)
		n := 0
		for k, j := range d.keys {
			n = max(n, j+1)
			if _, taken := x.slots[k]; taken || k == "" || x.nslots+j >= maxSlots {
				continue
			}
			x.slots[k] = base + slot(j)
			mark(k)
		}
		x.nslots = min(x.nslots+n, maxSlots)
		for _, fam := range d.families {
			if fam.prefix == "" {
				continue
			}
			x.families = append(x.families, indexedFamily{fam, uint8(i)})
			mark(fam.prefix)
		}
	}
	return x
}

// collect sorts h's fields into f, then applies the byte budgets. Keys are
// canonicalized, which costs no allocation for keys already canonical
// (textproto returns them as is). The cost is linear in the size of h,
// however many keys differ only in case. It reports whether h has a
// field of a dialect (Date is none): if not, f holds a Date at most, and
// the budgets are not applied.
func (f *fields) collect(h http.Header) bool {
	x := keyIndex()
	found := false
	for k, v := range h {
		if len(v) == 0 || k == "" || len(k) > maxKeyBytes || !x.starts[k[0]] {
			continue
		}
		ck := textproto.CanonicalMIMEHeaderKey(k)
		if s, ok := x.slots[ck]; ok {
			f.slot[s].add(v)
			found = found || s != slotDate
			continue
		}
		found = f.collectExt(x, ck, v) || found
	}
	if !found {
		return false
	}
	// Map order is random; the policies built from ext must not be.
	slices.SortFunc(f.ext[:f.next], func(a, b extField) int {
		if a.d != b.d {
			return int(a.d) - int(b.d)
		}
		return strings.Compare(a.rest, b.rest)
	})
	f.budget()
	return true
}

// collectExt files a key of a family whose key has a variable part, and
// reports whether the key is of one.
func (f *fields) collectExt(x *index, ck string, v []string) bool {
	var d uint8
	var rest string
	found := false
	for _, fam := range x.families {
		if !strings.HasPrefix(ck, fam.prefix) {
			continue
		}
		r := ck[len(fam.prefix)-fam.keep:]
		if len(ck) > len(fam.prefix) && (fam.accept == nil || fam.accept(r)) {
			d, rest, found = fam.d, r, true
			break
		}
	}
	if !found {
		return false
	}
	for i := range f.ext[:f.next] {
		if e := &f.ext[i]; e.d == d && e.rest == rest {
			e.vals.add(v)
			return true
		}
	}
	if f.next < maxExt {
		e := &f.ext[f.next]
		*e = extField{d: d, rest: rest}
		e.vals.add(v)
		f.next++
	}
	return true
}

// readAll reads every dialect's fields into r, in rank order.
func (f *fields) readAll(r *Reading, c *clock) {
	x := keyIndex()
	for i, d := range x.dialects {
		d.read(r, c, view{f: f, base: x.base[i], d: uint8(i)})
	}
}
