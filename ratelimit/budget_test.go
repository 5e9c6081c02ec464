package ratelimit

import (
	"fmt"
	"net/http"
	"net/textproto"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// padPolicy returns a RateLimit-Policy of exactly n bytes: a "burst"
// policy, then one whose name pads the field out.
func padPolicy(n int) string {
	head := `"burst";q=100;w=60, "`
	tail := `";q=1`
	return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
}

// repeated returns n copies of v, as n field lines.
func repeated(v string, n int) []string {
	l := make([]string, n)
	for i := range l {
		l[i] = v
	}
	return l
}

func TestParseFieldBudget(t *testing.T) {
	atBudget := padPolicy(maxFieldBytes - 2) // one line costs its bytes and 2
	pad := strings.TrimSuffix(strings.TrimPrefix(atBudget, `"burst";q=100;w=60, "`), `";q=1`)
	// Lines of "1" cost 3 bytes each: this many fit, one more does not.
	fit := maxFieldBytes / lineCost("1")
	runCases(t, []readingCase{
		{name: "a field at the budget is read",
			h: hdr("RateLimit-Policy", atBudget),
			want: Reading{Policies: []Policy{
				pol("burst", "requests", 100, no, time.Minute, no),
				pol(pad, "requests", 1, no, no, no),
			}}},
		{name: "a field a byte over is absent, the others kept",
			h:    hdr("RateLimit-Policy", padPolicy(maxFieldBytes-1), "Retry-After", "5"),
			want: Reading{RetryAfter: 5 * time.Second, HasRetryAfter: true}},
		{name: "lines count with their separators: as many as fit",
			h:    http.Header{"Retry-After": repeated("1", fit)},
			want: Reading{RetryAfter: time.Second, HasRetryAfter: true}},
		{name: "lines count with their separators: one more is absent",
			h: http.Header{"Retry-After": repeated("1", fit+1)}},
		{name: "empty lines are not free",
			h: http.Header{"X-Ratelimit-Remaining": append(repeated("", maxFieldBytes/2), "0")}},
		{name: "keys differing in case count as one field",
			h: http.Header{"x-ratelimit-remaining": repeated("1", fit/2+1), "X-Ratelimit-Remaining": repeated("1", fit/2+1),
				"X-Ratelimit-Limit": {"10"}},
			want: Reading{Policies: []Policy{pol("", "requests", 10, no, no, no)}}},
		{name: "a 9.5 MB field is absent",
			h:    hdr("RateLimit-Policy", hostilePolicy(9_500_000), "RateLimit", `"p0";r=0;t=30`),
			want: Reading{Policies: []Policy{pol("p0", "requests", no, 0, no, 30*time.Second)}}},
		{name: "a key over maxKeyBytes is skipped",
			h:    http.Header{"X-Ratelimit-Limit-" + strings.Repeat("a", maxKeyBytes): {"10"}, "X-Ratelimit-Remaining": {"3"}},
			want: Reading{Policies: []Policy{pol("", "requests", no, 3, no, no)}}},
	})
}

// TestParseResponseBudget fills five fields of nearly maxFieldBytes
// each and a short Retry-After: the response's budget admits them in slot
// order, then the variable-key families, and the first that does not fit
// is absent.
func TestParseResponseBudget(t *testing.T) {
	n := maxFieldBytes - 2
	list := func(n int) string { // "1, 1, 1, …" of n bytes or one less
		return strings.TrimSuffix(strings.Repeat("1, ", (n+2)/3), ", ")
	}
	h := http.Header{
		"Retry-After":                       {"7"},
		"Ratelimit-Policy":                  {padPolicy(n)},
		"Ratelimit-Limit":                   {list(n)},
		"X-Ratelimit-Limit":                 {list(n)},
		"Sforce-Limit-Info":                 {"api-usage=25/5000," + strings.Repeat(" ", n-len("api-usage=25/5000,"))},
		"X-Ms-Ratelimit-Remaining-Resource": {"a;1," + strings.Repeat(" ", n-len("a;1,"))},
	}
	var f fields
	f.collect(h)
	for _, tt := range []struct {
		name string
		got  []string
		read bool
	}{
		{"Retry-After", f.key("Retry-After"), true},
		{"RateLimit-Policy", f.key("Ratelimit-Policy"), true},
		{"RateLimit-Limit", f.key("Ratelimit-Limit"), true},
		{"X-RateLimit-Limit", f.key("X-Ratelimit-Limit"), true},
		{"Sforce-Limit-Info", f.key("Sforce-Limit-Info"), true},       // 3 + 8192 + 8190 + 8190 + 8192 bytes: fits
		{"X-Ms-Ratelimit-Remaining-Resource", f.ext[0].vals.v, false}, // 1 byte left
	} {
		if (tt.got != nil) != tt.read {
			t.Errorf("%s read = %v; want %v", tt.name, tt.got != nil, tt.read)
		}
	}
	q := Parse(h, now)
	checkReading(t, q)
	if !q.HasRetryAfter || q.RetryAfter != 7*time.Second {
		t.Errorf("RetryAfter = %v, %v; want 7s, true", q.RetryAfter, q.HasRetryAfter)
	}
}

// caseVariants returns n spellings of key, a lower-case key, that differ
// only in case, or as many as its letters allow.
func caseVariants(key string, n int) []string {
	letters := 0
	for _, c := range []byte(key) {
		if 'a' <= c && c <= 'z' {
			letters++
		}
	}
	if letters < 30 {
		n = min(n, 1<<letters)
	}
	out := make([]string, 0, n)
	for i := range n {
		b := []byte(key)
		bit := 0
		for j, c := range b {
			if 'a' <= c && c <= 'z' {
				if i>>bit&1 == 1 {
					b[j] = c - 'a' + 'A'
				}
				bit++
			}
		}
		out = append(out, string(b))
	}
	return out
}

// TestParseCaseVariantsLinear checks that keys differing only in case
// merge in time and memory linear in their number: 16k of them took 2.1 s
// when each merge copied and sorted the lines so far.
func TestParseCaseVariantsLinear(t *testing.T) {
	for _, tc := range []struct {
		name  string
		n     int
		value func(i int) string
		want  Reading
	}{
		// 1000 lines of 4 bytes, with their separators, are within the
		// field's budget: all are read, merged, the least kept.
		{"within the budget", 1000, func(i int) string { return strconv.Itoa(9999 - i) },
			Reading{Policies: []Policy{pol("", "requests", no, 9000, no, no)}}},
		{"over the budget", 16384, func(i int) string { return "5" }, Reading{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for i, k := range caseVariants("x-ratelimit-remaining", tc.n) {
				h[k] = []string{tc.value(i)}
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			got := Parse(h, now)
			elapsed := time.Since(start)
			runtime.ReadMemStats(&after)
			if !quotaEqual(got, tc.want) {
				t.Errorf("Parse(%d case variants) =\n%s\nwant\n%s", tc.n, fmtReading(got), fmtReading(tc.want))
			}
			// Canonicalizing a variant allocates its key (24 bytes);
			// quadratic merging allocated 2 GB for 16k variants.
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(tc.n)*256 {
				t.Errorf("Parse(%d case variants) allocated %d bytes; want at most %d", tc.n, alloc, tc.n*256)
			}
			// Generous: it takes a few ms; the quadratic merge took seconds.
			if elapsed > time.Second {
				t.Errorf("Parse(%d case variants) took %v; want well under 1s", tc.n, elapsed)
			}
		})
	}
}

// TestParseHugeFieldNotParsed checks that a field over the budget
// costs no parsing: Parse allocates for a 9.5 MB RateLimit-Policy what
// it does for none (its one Policies slice). 50 runs: under -race the
// pool of parse states drops a quarter of what it is given, and
// AllocsPerRun rounds the average down, so the drops never add a whole
// allocation to the average.
func TestParseHugeFieldNotParsed(t *testing.T) {
	h := hdr("RateLimit-Policy", hostilePolicy(9_500_000), "RateLimit", `"p0";r=0;t=30`)
	small := hdr("RateLimit", `"p0";r=0;t=30`)
	huge := testing.AllocsPerRun(50, func() { Parse(h, now) })
	none := testing.AllocsPerRun(50, func() { Parse(small, now) })
	if huge > none {
		t.Errorf("Parse with a 9.5 MB RateLimit-Policy: %v allocations; want %v, as without it", huge, none)
	}
}

// key returns the lines of the field read whole under the canonical key k.
func (f *fields) key(k string) []string {
	s, ok := keyIndex().slots[k]
	if !ok {
		return nil
	}
	return f.vals(s)
}

// hostilePolicy returns a valid Structured Field List of n bytes or a few
// more: named draft-08 policies, so that a parser that takes it on parses
// every member.
func hostilePolicy(n int) string {
	var b strings.Builder
	b.Grow(n + 64)
	for i := 0; b.Len() < n; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `"p%d";q=100;w=60`, i)
	}
	return b.String()
}

// registeredKeys returns a key for every key and family every dialect
// registered: for a family, its prefix and the first of a few rests its
// accept takes. It fails t when a family takes none of them.
func registeredKeys(t *testing.T) []string {
	t.Helper()
	rests := []string{"Limit-Requests", "Limit-Minute", "Requests-Limit", "Limit-24hour-Reset", "Subscription-Reads", "Max"}
	keys := []string{"Date"}
	for _, d := range registry {
		for k := range d.keys {
			keys = append(keys, k)
		}
	families:
		for _, fam := range d.families {
			for _, r := range rests {
				if fam.accept == nil || fam.accept(r) {
					keys = append(keys, fam.prefix+r)
					continue families
				}
			}
			t.Errorf("dialect %s: family %q accepts none of %q; add a rest it reads to this test", d.name, fam.prefix, rests)
		}
	}
	return keys
}

// TestRegistry checks that the dialects registered fit together: ranks
// and keys are their own, keys are canonical, the fields fit in maxSlots,
// and every dialect reads something.
func TestRegistry(t *testing.T) {
	ranks := map[int]string{}
	owner := map[string]string{"Date": "the clock"}
	n := 1
	for _, d := range registry {
		if d.read == nil || len(d.keys)+len(d.families) == 0 {
			t.Errorf("dialect %s reads nothing", d.name)
		}
		if o, ok := ranks[d.rank]; ok {
			t.Errorf("dialects %s and %s share rank %d; give each its own rank constant", o, d.name, d.rank)
		}
		ranks[d.rank] = d.name
		fields := 0
		for k, i := range d.keys {
			if ck := textproto.CanonicalMIMEHeaderKey(k); ck != k {
				t.Errorf("dialect %s: key %q is not canonical; write %q", d.name, k, ck)
			}
			if o, ok := owner[k]; ok {
				t.Errorf("key %q is read by %s and %s; one dialect reads a key", k, o, d.name)
			}
			owner[k] = d.name
			fields = max(fields, i+1)
		}
		n += fields
		for _, fam := range d.families {
			if ck := textproto.CanonicalMIMEHeaderKey(fam.prefix); ck != fam.prefix {
				t.Errorf("dialect %s: prefix %q is not canonical; write %q", d.name, fam.prefix, ck)
			}
		}
	}
	if n > maxSlots {
		t.Errorf("the dialects read %d fields whole; maxSlots is %d: raise it", n, maxSlots)
	}
	if len(registry) > 255 {
		t.Errorf("%d dialects; extField numbers them in a byte", len(registry))
	}
}

// TestCollectReadsEveryKey checks that every key the dialects register is
// read in any case, among unrelated keys starting with every letter: the
// quick filter in collect can drop no key a dialect reads, and a key is
// filed once.
func TestCollectReadsEveryKey(t *testing.T) {
	unrelated := http.Header{}
	for c := 'a'; c <= 'z'; c++ {
		unrelated[string(c)+"-Unrelated"] = []string{"1"}
		unrelated[strings.ToUpper(string(c))+"-Unrelated"] = []string{"1"}
	}
	for _, k := range registeredKeys(t) {
		for _, spelling := range []string{k, strings.ToLower(k), strings.ToUpper(k)} {
			h := unrelated.Clone()
			h[spelling] = []string{"marker"}
			var f fields
			f.collect(h)
			found := 0
			for _, l := range f.slot {
				for _, v := range l.v {
					if v == "marker" {
						found++
					}
				}
			}
			for _, e := range f.ext[:f.next] {
				for _, v := range e.vals.v {
					if v == "marker" {
						found++
					}
				}
			}
			if found != 1 {
				t.Errorf("collect filed %q %d times; want once", spelling, found)
			}
		}
	}
}

// TestKeyStarts checks the quick filter against the registry directly.
func TestKeyStarts(t *testing.T) {
	starts := keyIndex().starts
	for _, k := range registeredKeys(t) {
		for _, s := range []string{k, strings.ToLower(k), strings.ToUpper(k)} {
			if !starts[s[0]] {
				t.Errorf("the filter drops %q: no dialect key starts with %q", s, s[0])
			}
		}
	}
	if starts['C'] || starts['c'] {
		t.Errorf("the filter admits Content-Type; no key read starts with C")
	}
}

func BenchmarkParseHugeField(b *testing.B) {
	h := hdr("RateLimit-Policy", hostilePolicy(9_500_000))
	b.ReportAllocs()
	for b.Loop() {
		Parse(h, now)
	}
}
