package throttle

import (
	"net/http"
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

func TestParseQuotaFieldBudget(t *testing.T) {
	atBudget := padPolicy(maxFieldBytes - 2) // one line costs its bytes and 2
	pad := strings.TrimSuffix(strings.TrimPrefix(atBudget, `"burst";q=100;w=60, "`), `";q=1`)
	// Lines of "1" cost 3 bytes each: this many fit, one more does not.
	fit := maxFieldBytes / lineCost("1")
	runQuotaCases(t, []quotaCase{
		{name: "a field at the budget is read",
			h: hdr("RateLimit-Policy", atBudget),
			want: Quota{Policies: []Policy{
				pol("burst", "requests", 100, no, time.Minute, no),
				pol(pad, "requests", 1, no, no, no),
			}}},
		{name: "a field a byte over is absent, the others kept",
			h:    hdr("RateLimit-Policy", padPolicy(maxFieldBytes-1), "Retry-After", "5"),
			want: Quota{RetryAfter: 5 * time.Second, HasRetryAfter: true}},
		{name: "lines count with their separators: as many as fit",
			h:    http.Header{"Retry-After": repeated("1", fit)},
			want: Quota{RetryAfter: time.Second, HasRetryAfter: true}},
		{name: "lines count with their separators: one more is absent",
			h: http.Header{"Retry-After": repeated("1", fit+1)}},
		{name: "empty lines are not free",
			h: http.Header{"X-Ratelimit-Remaining": append(repeated("", maxFieldBytes/2), "0")}},
		{name: "keys differing in case count as one field",
			h: http.Header{"x-ratelimit-remaining": repeated("1", fit/2+1), "X-Ratelimit-Remaining": repeated("1", fit/2+1),
				"X-Ratelimit-Limit": {"10"}},
			want: Quota{Policies: []Policy{pol("", "requests", 10, no, no, no)}}},
		{name: "a 9.5 MB field is absent",
			h:    hdr("RateLimit-Policy", hostilePolicy(9_500_000), "RateLimit", `"p0";r=0;t=30`),
			want: Quota{Policies: []Policy{pol("p0", "requests", no, 0, no, 30*time.Second)}}},
		{name: "a key over maxKeyBytes is skipped",
			h:    http.Header{"X-Ratelimit-Limit-" + strings.Repeat("a", maxKeyBytes): {"10"}, "X-Ratelimit-Remaining": {"3"}},
			want: Quota{Policies: []Policy{pol("", "requests", no, 3, no, no)}}},
	})
}

// TestParseQuotaResponseBudget fills five fields of nearly maxFieldBytes
// each and a short Retry-After: the response's budget admits them in slot
// order, then the variable-key families, and the first that does not fit
// is absent.
func TestParseQuotaResponseBudget(t *testing.T) {
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
		{"Retry-After", f.vals(slotRetryAfter), true},
		{"RateLimit-Policy", f.vals(slotRlPolicy), true},
		{"RateLimit-Limit", f.vals(slotRlLimit), true},
		{"X-RateLimit-Limit", f.vals(slotXLimit), true},
		{"Sforce-Limit-Info", f.vals(slotSalesforce), true},           // 3 + 8192 + 8190 + 8190 + 8192 bytes: fits
		{"X-Ms-Ratelimit-Remaining-Resource", f.ext[0].vals.v, false}, // 1 byte left
	} {
		if (tt.got != nil) != tt.read {
			t.Errorf("%s read = %v; want %v", tt.name, tt.got != nil, tt.read)
		}
	}
	q := ParseQuota(h, now)
	checkQuota(t, q)
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

// TestParseQuotaCaseVariantsLinear checks that keys differing only in case
// merge in time and memory linear in their number: 16k of them took 2.1 s
// when each merge copied and sorted the lines so far.
func TestParseQuotaCaseVariantsLinear(t *testing.T) {
	for _, tc := range []struct {
		name  string
		n     int
		value func(i int) string
		want  Quota
	}{
		// 1000 lines of 4 bytes, with their separators, are within the
		// field's budget: all are read, merged, the least kept.
		{"within the budget", 1000, func(i int) string { return strconv.Itoa(9999 - i) },
			Quota{Policies: []Policy{pol("", "requests", no, 9000, no, no)}}},
		{"over the budget", 16384, func(i int) string { return "5" }, Quota{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for i, k := range caseVariants("x-ratelimit-remaining", tc.n) {
				h[k] = []string{tc.value(i)}
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			got := ParseQuota(h, now)
			elapsed := time.Since(start)
			runtime.ReadMemStats(&after)
			if !quotaEqual(got, tc.want) {
				t.Errorf("ParseQuota(%d case variants) =\n%s\nwant\n%s", tc.n, fmtQuota(got), fmtQuota(tc.want))
			}
			// Canonicalizing a variant allocates its key (24 bytes);
			// quadratic merging allocated 2 GB for 16k variants.
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(tc.n)*256 {
				t.Errorf("ParseQuota(%d case variants) allocated %d bytes; want at most %d", tc.n, alloc, tc.n*256)
			}
			// Generous: it takes a few ms; the quadratic merge took seconds.
			if elapsed > time.Second {
				t.Errorf("ParseQuota(%d case variants) took %v; want well under 1s", tc.n, elapsed)
			}
		})
	}
}

// TestParseQuotaHugeFieldNotParsed checks that a field over the budget
// costs no parsing: ParseQuota allocates for a 9.5 MB RateLimit-Policy what
// it does for none (its one Policies slice).
func TestParseQuotaHugeFieldNotParsed(t *testing.T) {
	h := hdr("RateLimit-Policy", hostilePolicy(9_500_000), "RateLimit", `"p0";r=0;t=30`)
	small := hdr("RateLimit", `"p0";r=0;t=30`)
	huge := testing.AllocsPerRun(5, func() { ParseQuota(h, now) })
	none := testing.AllocsPerRun(5, func() { ParseQuota(small, now) })
	if huge > none {
		t.Errorf("ParseQuota with a 9.5 MB RateLimit-Policy: %v allocations; want %v, as without it", huge, none)
	}
}

// TestCollectReadsEveryKey checks that every key of the dialect tables is
// read in any case, among unrelated keys starting with every letter: a
// quick filter in collect can drop no key the tables list.
func TestCollectReadsEveryKey(t *testing.T) {
	var keys []string
	for k := range slots {
		keys = append(keys, k)
	}
	for _, e := range extFamilies {
		// A key of the family that collectExt files: for X-Ratelimit-,
		// a unit after the field name.
		keys = append(keys, e.prefix+"Limit-Requests")
	}
	unrelated := http.Header{}
	for c := 'a'; c <= 'z'; c++ {
		unrelated[string(c)+"-Unrelated"] = []string{"1"}
		unrelated[strings.ToUpper(string(c))+"-Unrelated"] = []string{"1"}
	}
	for _, k := range keys {
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

// TestKeyStarts checks the quick filter against its tables directly.
func TestKeyStarts(t *testing.T) {
	check := func(k string) {
		t.Helper()
		for _, s := range []string{k, strings.ToLower(k), strings.ToUpper(k)} {
			if !keyStarts[s[0]] {
				t.Errorf("keyStarts[%q] = false for %q", s[0], s)
			}
		}
	}
	for k := range slots {
		check(k)
	}
	for _, e := range extFamilies {
		check(e.prefix)
	}
	if keyStarts['C'] || keyStarts['c'] {
		t.Errorf("keyStarts admits Content-Type; no key read starts with C")
	}
}

func BenchmarkParseQuotaHugeField(b *testing.B) {
	h := hdr("RateLimit-Policy", hostilePolicy(9_500_000))
	b.ReportAllocs()
	for b.Loop() {
		ParseQuota(h, now)
	}
}
