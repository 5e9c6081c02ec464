package ratelimit

import (
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fuzzNames are the keys FuzzParse fills: every field a dialect reads,
// so that the fuzzer spends its time on values, not on guessing names.
var fuzzNames = [...]string{
	"Retry-After", "Retry-After-Ms", "X-Ms-Retry-After-Ms",
	"Ratelimit", "Ratelimit-Policy", "Ratelimit-Limit", "Ratelimit-Remaining", "Ratelimit-Reset", "Ratelimit-Resettime",
	"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset", "X-Ratelimit-Reset-After", "X-Ratelimit-Used",
	"X-Ratelimit-Resource", "X-Ratelimit-Bucket", "X-Ratelimit-Global", "X-Ratelimit-Scope", "X-Ratelimit-Nearlimit",
	"X-Ratelimit-Interval-Seconds", "X-Rate-Limit-Limit", "X-Rate-Limit-Remaining", "X-Rate-Limit-Reset", "X-Rate-Limit",
	"X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Requests", "X-Ratelimit-Reset-Tokens",
	"X-Ratelimit-Limit-Minute", "X-Ratelimit-Remaining-Minute", "X-Ratelimit-Requests-Reset", "X-Ratelimit-Complexity-Remaining",
	"Anthropic-Ratelimit-Requests-Reset", "Anthropic-Ratelimit-Tokens-Remaining", "Anthropic-Ratelimit-Input-Tokens-Limit",
	"X-Ms-Ratelimit-Remaining-Subscription-Reads", "X-Ms-Ratelimit-Remaining-Resource",
	"Zendesk-Ratelimit-Tickets-Index", "X-Hubspot-Ratelimit-Max", "X-Hubspot-Ratelimit-Interval-Milliseconds",
	"X-Hubspot-Ratelimit-Daily-Remaining", "X-Shopify-Shop-Api-Call-Limit", "Sforce-Limit-Info",
	"X-Should-Retry", "X-User-Limit-24hour-Limit", "X-User-Limit-24hour-Remaining", "X-User-Limit-24hour-Reset",
	"X-App-Limit-24hour-Remaining", "X-App-Limit-24hour-Reset",
}

func FuzzParse(f *testing.F) {
	idx := func(name string) uint8 {
		for i, n := range fuzzNames {
			if n == name {
				return uint8(i)
			}
		}
		panic(name)
	}
	date := "Mon, 26 May 2025 05:00:04 GMT"
	seeds := []struct {
		a    string
		va   string
		b    string
		vb   string
		c    string
		vc   string
		key  string
		vkey string
	}{
		{"X-Ratelimit-Limit", "5000", "X-Ratelimit-Remaining", "4999", "X-Ratelimit-Reset", "1748239204", "X-Ratelimit-Used", "1"},
		{"X-Ratelimit-Limit-Requests", "60", "X-Ratelimit-Remaining-Tokens", "149984", "X-Ratelimit-Reset-Tokens", "6m0s", "x-ratelimit-reset-requests", "1s"},
		{"X-Ratelimit-Limit-Requests", "60", "X-Ratelimit-Reset-Requests", "59.833s", "X-Ratelimit-Reset-Tokens", "1ms", "x-ratelimit-remaining-requests", "0"},
		{"Anthropic-Ratelimit-Input-Tokens-Limit", "1000000000000", "Anthropic-Ratelimit-Tokens-Remaining", "0", "Anthropic-Ratelimit-Requests-Reset", "2025-05-26T05:01:04Z", "anthropic-ratelimit-input-tokens-remaining", "0"},
		{"Ratelimit-Policy", `"burst";q=100;w=60, "daily";q=1000;w=86400`, "Ratelimit", `"burst";r=50;t=30`, "Retry-After", "30", "ratelimit", `"daily";r=0;t=3600`},
		{"Ratelimit", "limit=100, remaining=50, reset=5", "Ratelimit-Policy", "100;w=60", "Ratelimit-Limit", "10, 10;w=1, 50;w=60", "RateLimit-Remaining", "0"},
		{"Ratelimit-Limit", "100;w=21600", "Ratelimit-Remaining", "76;w=21600", "Ratelimit-Reset", "1609844400", "RateLimit-ResetTime", "Tue, 05 Jan 2021 11:00:00 GMT"},
		{"X-Ratelimit-Reset-After", "1.234", "X-Ratelimit-Reset", "1470173023.123", "X-Ratelimit-Global", "true", "X-RateLimit-Bucket", "abcd1234"},
		{"Anthropic-Ratelimit-Requests-Reset", "2025-05-26T05:01:04Z", "X-Shopify-Shop-Api-Call-Limit", "32/40", "Sforce-Limit-Info", "api-usage=25/15000", "retry-after", "2.0"},
		{"Zendesk-Ratelimit-Tickets-Index", "total=100; remaining=99; resets=41", "X-Ms-Ratelimit-Remaining-Resource", "Microsoft.Compute/HighCostGet3Min;159", "Retry-After-Ms", "1500", "X-Hubspot-Ratelimit-Secondly", "10"},
		{"X-Ratelimit-Remaining", "598.0", "X-Ratelimit-Used", "2", "X-Ratelimit-Reset", "2025-05-26T05:30Z", "X-RateLimit-Limit-Minute", "10"},
		{"Retry-After", "Sunday, 06-Nov-94 08:49:37 GMT", "Retry-After", "Sun Nov  6 08:49:37 1994", "Retry-After", "-1", "X-Ratelimit-Limit", "10, 10;w=60"},
		{"X-User-Limit-24hour-Remaining", "0", "X-User-Limit-24hour-Reset", "1748278804", "X-App-Limit-24hour-Remaining", "1500", "x-app-limit-24hour-limit", "1667"},
		{"Sforce-Limit-Info", "api-usage=25/5000; per-app-api-usage=17/250(appName=sample-connected-app)", "X-Should-Retry", "false", "Retry-After", "1", "retry-after-ms", "255"},
		{"X-Ratelimit-Used", "4611686018427387904", "X-Ratelimit-Remaining", "4611686018427387904", "Ratelimit", `"b";r=0;t=1748235664`, "x-should-retry", "true"},
	}
	for _, s := range seeds {
		f.Add(idx(s.a), s.va, idx(s.b), s.vb, idx(s.c), s.vc, s.key, s.vkey, date, int64(1748235604))
	}
	f.Fuzz(func(t *testing.T, a uint8, va string, b uint8, vb string, c uint8, vc string, key, vkey, date string, recv int64) {
		h := http.Header{}
		for _, kv := range [...]struct {
			i uint8
			v string
		}{{a, va}, {b, vb}, {c, vc}} {
			name := fuzzNames[int(kv.i)%len(fuzzNames)]
			h[name] = append(h[name], kv.v)
		}
		h[key] = append(h[key], vkey)
		if date != "" {
			h["Date"] = []string{date}
		}
		before := h.Clone()
		received := time.Unix(recv, 0)
		q := Parse(h, received)
		if !reflect.DeepEqual(h, before) {
			t.Fatalf("Parse modified its headers: %v, was %v", h, before)
		}
		checkReading(t, q)
		if q2 := Parse(h, received); !reflect.DeepEqual(q, q2) {
			t.Fatalf("Parse not deterministic: %+v then %+v", q, q2)
		}
	})
}

// checkReading asserts the invariants every Reading keeps, whatever the input.
func checkReading(t *testing.T, q Reading) {
	t.Helper()
	inRange := func(d time.Duration) bool { return d >= 0 && d <= maxWait }
	if !inRange(q.RetryAfter) || (!q.HasRetryAfter && q.RetryAfter != 0) {
		t.Fatalf("RetryAfter = %v, %v", q.RetryAfter, q.HasRetryAfter)
	}
	for _, p := range q.Policies {
		if !(p.HasLimit || p.HasRemaining || p.HasWindow || p.HasReset) || p.Unit == "" {
			t.Fatalf("policy without numbers or unit: %+v", p)
		}
		if p.Limit < 0 || p.Remaining < 0 || !inRange(p.Window) || !inRange(p.Reset) {
			t.Fatalf("policy out of range: %+v", p)
		}
		for _, z := range [...]struct {
			has  bool
			zero bool
		}{{p.HasLimit, p.Limit == 0}, {p.HasRemaining, p.Remaining == 0}, {p.HasWindow, p.Window == 0}, {p.HasReset, p.Reset == 0}} {
			if !z.has && !z.zero {
				t.Fatalf("absent number not 0: %+v", p)
			}
		}
	}
	if d, ok := q.Wait(); !inRange(d) || (!ok && d != 0) {
		t.Fatalf("Wait() = %v, %v", d, ok)
	}
	if _, ok := q.Binding(); ok != (len(q.Policies) > 0) {
		t.Fatalf("Binding() ok = %v with %d policies", ok, len(q.Policies))
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, v := range []string{
		"120", "2.0", "0", "Fri, 31 Dec 1999 23:59:59 GMT", "Friday, 31-Dec-99 23:59:59 GMT",
		"Fri Dec 31 23:59:59 1999", "+30", "0x1E", "1e30", "NaN", "３０", "-1", "", " 5 ", "99999999999999999999",
	} {
		f.Add(v, int64(946684800), int64(30))
	}
	f.Fuzz(func(t *testing.T, v string, date, skew int64) {
		dt := time.Unix(date, 0)
		d, ok := ParseRetryAfter(v, dt, time.Unix(date, 0))
		if d < 0 || d > maxWait || (!ok && d != 0) {
			t.Fatalf("ParseRetryAfter(%q) = %v, %v", v, d, ok)
		}
		// The response's Date, when given, is the only clock that counts.
		if dt.IsZero() {
			return
		}
		if d2, ok2 := ParseRetryAfter(v, dt, time.Unix(date, 0).Add(time.Duration(skew))); d2 != d || ok2 != ok {
			t.Fatalf("ParseRetryAfter(%q) = %v, %v with a skewed local clock; want %v, %v", v, d2, ok2, d, ok)
		}
	})
}

func FuzzReset(f *testing.F) {
	for _, v := range []string{
		"1s", "6m0s", "12ms", "7.66s", "2m59.56s", "1748239204", "1748239204123", "60", "1.234",
		"2025-05-26T05:01:04Z", "2025-05-26T05:30Z", "Mon, 26 May 2025 05:10:04 GMT", "-1s", "+1s", "1e3s", "9999999h",
	} {
		f.Add(v, uint8(0))
	}
	c := &clock{now: time.Unix(1748235604, 0), ready: true}
	f.Fuzz(func(t *testing.T, v string, kind uint8) {
		k := resetKind(kind) % (resetEpoch + 1)
		d, ok := c.reset(v, k)
		if d < 0 || d > maxWait || (!ok && d != 0) {
			t.Fatalf("reset(%q, %d) = %v, %v", v, k, d, ok)
		}
	})
}

func FuzzParseDecimal(f *testing.F) {
	for _, v := range []string{"0", "2.0", "598.0", "1.234", "1470173023.123", "+30", "0x1E", "1e30", "NaN", "３０", ".5", "5.", "9223372036854775808"} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		whole, nano, ok := parseDecimal(v)
		if !ok {
			if whole != 0 || nano != 0 {
				t.Fatalf("parseDecimal(%q) = %d, %d, false", v, whole, nano)
			}
			return
		}
		if whole < 0 || nano < 0 || nano >= 1e9 {
			t.Fatalf("parseDecimal(%q) = %d, %d, true", v, whole, nano)
		}
		// The whole part is exactly what strconv reads from the digits.
		s := trimOWS(v)
		intPart, _, _ := strings.Cut(s, ".")
		if n, err := strconv.ParseUint(intPart, 10, 63); err != nil || int64(n) != whole || intPart[0] == '+' {
			t.Fatalf("parseDecimal(%q) whole = %d; strconv says %d, %v", v, whole, n, err)
		}
	})
}

// FuzzIETF feeds the Structured Fields of every IETF draft generation
// directly, where FuzzParse spreads its effort over every dialect.
func FuzzIETF(f *testing.F) {
	f.Add(`"burst";q=100;w=60, "daily";q=1000;w=86400`, `"burst";r=50;t=30`, "", "", "")
	f.Add(`"peruser";q=65535;qu="content-bytes";w=10;pk=:dXNlcjEyMw==:`, `"peruser";r=1024;t=2;pk=:dXNlcjEyMw==:`, "", "", "")
	f.Add("100;w=60", "limit=100, remaining=50, reset=5", "", "", "")
	f.Add("10;w=1, 50;w=60", "", "10", "1", "7")
	f.Add("", "", "10, 10;w=1, 50;window=60", "76;w=21600", "1609844400")
	f.Add("", `burst;r=3;t=1, ("inner" "list");r=1`, "100;w=21600", "-1", "@1659578233")
	f.Fuzz(func(t *testing.T, policy, rl, limit, remaining, reset string) {
		h := http.Header{}
		for _, kv := range [...][2]string{
			{"Ratelimit-Policy", policy}, {"Ratelimit", rl}, {"Ratelimit-Limit", limit},
			{"Ratelimit-Remaining", remaining}, {"Ratelimit-Reset", reset}, {"X-Ratelimit-Limit", limit},
		} {
			if kv[1] != "" {
				h[kv[0]] = []string{kv[1]}
			}
		}
		q := Parse(h, time.Unix(1748235604, 0))
		checkReading(t, q)
		if q2 := Parse(h, time.Unix(1748235604, 0)); !reflect.DeepEqual(q, q2) {
			t.Fatalf("Parse not deterministic: %+v then %+v", q, q2)
		}
	})
}

// FuzzCollect builds header maps with many keys that differ only in case
// and many lines, and checks the byte budgets: no field read is over
// maxFieldBytes, the fields read together are within maxResponseBytes, the
// result does not depend on the map's order, and h is not modified.
func FuzzCollect(f *testing.F) {
	f.Add(uint8(0), "5", uint16(3), uint16(2), uint8(1), "30")
	f.Add(uint8(3), `"burst";q=100;w=60`, uint16(40), uint16(300), uint8(4), `"burst";r=0;t=30`)
	f.Add(uint8(45), "false", uint16(1), uint16(1), uint8(0), "1")
	f.Add(uint8(10), "", uint16(1000), uint16(9), uint8(9), "")
	f.Fuzz(func(t *testing.T, a uint8, va string, variants, nlines uint16, b uint8, vb string) {
		name := fuzzNames[int(a)%len(fuzzNames)]
		h := http.Header{}
		for i, k := range caseVariants(strings.ToLower(name), 1+int(variants)%1024) {
			h[k] = repeated(va+strconv.Itoa(i%3), 1+int(nlines)%64)
		}
		other := fuzzNames[int(b)%len(fuzzNames)]
		h[other] = append(h[other], vb)
		before := h.Clone()
		var fs fields
		fs.collect(h)
		total := 0
		check := func(what string, l lines) {
			if l.v == nil {
				return
			}
			size := 0
			for _, s := range l.v {
				size += lineCost(s)
			}
			if size > maxFieldBytes {
				t.Fatalf("%s read with %d bytes; want at most %d", what, size, maxFieldBytes)
			}
			total += size
		}
		for i, l := range fs.slot {
			check(fmt.Sprint("slot ", i), l)
		}
		for _, e := range fs.ext[:fs.next] {
			check(e.rest, e.vals)
		}
		if total > maxResponseBytes {
			t.Fatalf("fields read come to %d bytes; want at most %d", total, maxResponseBytes)
		}
		received := time.Unix(1748235604, 0)
		q := Parse(h, received)
		checkReading(t, q)
		if !reflect.DeepEqual(h, before) {
			t.Fatalf("Parse modified its headers")
		}
		if q2 := Parse(h, received); !reflect.DeepEqual(q, q2) {
			t.Fatalf("Parse not deterministic: %+v then %+v", q, q2)
		}
	})
}
