package ratelimit

import (
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"
)

// now is the Date of most test responses: Mon, 26 May 2025 05:00:04 GMT.
var now = time.Date(2025, 5, 26, 5, 0, 4, 0, time.UTC)

const nowDate = "Mon, 26 May 2025 05:00:04 GMT"

// epoch returns now+d as epoch seconds, the way GitHub writes a reset.
func epoch(d time.Duration) string { return strconv.FormatInt(now.Add(d).Unix(), 10) }

// near returns the local receive time for a response whose Date is date,
// with the local clock off by skew: a documented example is received near
// its own Date, or the Date would be implausible and ignored.
func near(date string, skew time.Duration) time.Time {
	t, err := http.ParseTime(date)
	if err != nil {
		panic(err)
	}
	return t.Add(skew)
}

// hdr builds headers from name, value pairs, as a server would send them
// (h.Add canonicalizes names; a repeated name is a repeated field line).
func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// readingCase is one response and the Reading it must parse into. received is
// now unless set.
type readingCase struct {
	name     string
	h        http.Header
	received time.Time
	want     Reading
}

func runCases(t *testing.T, cases []readingCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			received := tc.received
			if received.IsZero() {
				received = now
			}
			got := Parse(tc.h, received)
			if !quotaEqual(got, tc.want) {
				t.Errorf("Parse(%v) =\n%s\nwant\n%s", tc.h, fmtReading(got), fmtReading(tc.want))
			}
			checkReading(t, got)
		})
	}
}

// policyEqual compares two Policies, their ResetAt as instants (== would
// compare their locations too).
func policyEqual(p, q Policy) bool {
	at := p.ResetAt.Equal(q.ResetAt)
	p.ResetAt, q.ResetAt = time.Time{}, time.Time{}
	return at && p == q
}

// quotaEqual compares two Readings but for their policies' ResetAt, which
// TestParseResetAt checks.
func quotaEqual(a, b Reading) bool {
	noAt := func(p, q Policy) bool {
		p.ResetAt = q.ResetAt
		return policyEqual(p, q)
	}
	return slices.EqualFunc(a.Policies, b.Policies, noAt) && a.RetryAfter == b.RetryAfter &&
		a.HasRetryAfter == b.HasRetryAfter && a.NearLimit == b.NearLimit && a.Global == b.Global &&
		a.ShouldRetry == b.ShouldRetry && a.HasShouldRetry == b.HasShouldRetry
}

func fmtReading(q Reading) string {
	s := fmt.Sprintf("  RetryAfter=%v (%v) NearLimit=%v Global=%v ShouldRetry=%v (%v)",
		q.RetryAfter, q.HasRetryAfter, q.NearLimit, q.Global, q.ShouldRetry, q.HasShouldRetry)
	for _, p := range q.Policies {
		s += fmt.Sprintf("\n  %+v", p)
	}
	return s
}

// pol builds the Policy a test expects; the Has bools follow from which
// numbers are given (-1 means absent).
func pol(name, unit string, limit, remaining int64, window, reset time.Duration) Policy {
	p := Policy{Name: name, Unit: unit}
	if limit >= 0 {
		p.Limit, p.HasLimit = limit, true
	}
	if remaining >= 0 {
		p.Remaining, p.HasRemaining = remaining, true
	}
	if window >= 0 {
		p.Window, p.HasWindow = window, true
	}
	if reset >= 0 {
		p.Reset, p.HasReset = reset, true
	}
	return p
}

const no = -1 // an absent number in pol

// refilling marks p as a bucket that refills continuously, with window w
// (no for none told).
func refilling(p Policy, w time.Duration) Policy {
	p.Refills = true
	if w >= 0 {
		p.Window, p.HasWindow = w, true
	}
	return p
}

func TestReadingWait(t *testing.T) {
	tests := []struct {
		name   string
		q      Reading
		want   time.Duration
		wantOK bool
	}{
		{"empty", Reading{}, 0, false},
		{"retry-after wins even when shorter", Reading{
			Policies:   []Policy{pol("", "requests", 10, 0, no, time.Hour)},
			RetryAfter: 2 * time.Second, HasRetryAfter: true,
		}, 2 * time.Second, true},
		{"retry-after 0", Reading{HasRetryAfter: true}, 0, true},
		{"longest reset among exhausted", Reading{Policies: []Policy{
			pol("a", "requests", 10, 0, no, 30*time.Second),
			pol("b", "tokens", 10, 5, no, time.Hour),
			pol("c", "requests", 10, 0, no, time.Minute),
		}}, time.Minute, true},
		{"quota remains", Reading{Policies: []Policy{
			pol("", "requests", 10, 3, no, 30*time.Second),
		}}, 0, true},
		{"exhausted without reset is unknown", Reading{Policies: []Policy{
			pol("", "requests", 10, 0, no, no),
			pol("", "tokens", 10, 5, no, time.Second),
		}}, 0, false},
		{"no remaining given", Reading{Policies: []Policy{
			pol("", "requests", 10, no, time.Minute, no),
		}}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tt.q.Wait()
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("Wait() = %v, %v; want %v, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestReadingBinding(t *testing.T) {
	tests := []struct {
		name     string
		policies []Policy
		want     int // index into policies; -1: none
	}{
		{"none", nil, -1},
		{"one", []Policy{pol("", "requests", 10, 5, no, no)}, 0},
		{"least remaining, absolute", []Policy{
			pol("", "tokens", 150000, 149984, no, 6*time.Minute),
			pol("", "requests", 60, 59, no, time.Second),
		}, 1},
		{"exhausted beats less remaining", []Policy{
			pol("burst", "requests", 10, 1, no, no),
			pol("daily", "requests", 1000, 0, no, time.Hour),
		}, 1},
		{"longest reset among exhausted", []Policy{
			pol("a", "requests", 10, 0, no, time.Second),
			pol("b", "requests", 10, 0, no, time.Hour),
			pol("c", "requests", 10, 0, no, no),
		}, 1},
		{"a known remaining beats an unknown one", []Policy{
			pol("", "requests", 50, no, time.Minute, no),
			pol("", "requests", 10, 9, no, no),
		}, 1},
		{"ties go to the first", []Policy{
			pol("a", "requests", 10, 5, no, no),
			pol("b", "requests", 10, 5, no, no),
		}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Reading{Policies: tt.policies}.Binding()
			if tt.want < 0 {
				if ok {
					t.Errorf("Binding() = %+v, true; want false", got)
				}
				return
			}
			if !ok || got != tt.policies[tt.want] {
				t.Errorf("Binding() = %+v, %v; want %+v, true", got, ok, tt.policies[tt.want])
			}
		})
	}
}

func TestParseRules(t *testing.T) {
	runCases(t, []readingCase{
		{name: "no headers", h: http.Header{}},
		{name: "unrelated headers", h: hdr("Content-Type", "application/json", "Date", nowDate)},
		{
			name: "repeated fields keep the most conservative value",
			h: hdr("X-RateLimit-Limit", "100", "X-RateLimit-Limit", "60",
				"X-RateLimit-Remaining", "7", "X-RateLimit-Remaining", "3",
				"X-RateLimit-Reset", "10", "X-RateLimit-Reset", "40",
				"Retry-After", "5", "Retry-After", "20"),
			want: Reading{Policies: []Policy{pol("", "requests", 60, 3, no, 40*time.Second)}, RetryAfter: 20 * time.Second, HasRetryAfter: true},
		},
		{
			name: "keys in any case",
			h:    http.Header{"x-ratelimit-limit": {"100"}, "X-RATELIMIT-REMAINING": {"0"}, "x-RateLimit-Reset": {"30"}},
			want: Reading{Policies: []Policy{pol("", "requests", 100, 0, no, 30*time.Second)}},
		},
		{
			name: "same key in two cases merges conservatively",
			h:    http.Header{"x-ratelimit-remaining": {"5"}, "X-Ratelimit-Remaining": {"2"}},
			want: Reading{Policies: []Policy{pol("", "requests", no, 2, no, no)}},
		},
		{
			name: "invalid numbers are absent, never 0",
			h: hdr("X-RateLimit-Limit", "-1", "X-RateLimit-Remaining", "+30",
				"X-RateLimit-Reset", "NaN", "X-RateLimit-Used", "0x1E",
				"X-RateLimit-Limit-Requests", "1e30", "X-RateLimit-Remaining-Requests", "３０",
				"X-RateLimit-Reset-Requests", "", "X-RateLimit-Limit-Tokens", "99999999999999999999",
				"X-RateLimit-Remaining-Tokens", " ", "X-RateLimit-Reset-Tokens", "-1s"),
		},
		{
			name: "a wait or reset over a year is absent",
			h: hdr("Date", nowDate, "Retry-After", "31536001", "X-RateLimit-Remaining", "0",
				"X-RateLimit-Reset", epoch(366*24*time.Hour), "X-RateLimit-Reset-Tokens", "8761h",
				"X-RateLimit-Remaining-Tokens", "0"),
			want: Reading{Policies: []Policy{pol("", "requests", no, 0, no, no), refilling(pol("", "tokens", no, 0, no, no), no)}},
		},
		{
			name: "a year exactly is kept",
			h:    hdr("Retry-After", "31536000"),
			want: Reading{RetryAfter: maxWait, HasRetryAfter: true},
		},
		{
			name: "identical policies from two dialects are one",
			h: hdr("X-Rate-Limit", "700", "X-Rate-Limit-Remaining", "699",
				"RateLimit-Limit", "700", "RateLimit-Remaining", "699"),
			want: Reading{Policies: []Policy{pol("", "requests", 700, 699, no, no)}},
		},
	})
}

func TestParseEpochOrDelta(t *testing.T) {
	runCases(t, []readingCase{
		{name: "delta seconds", h: hdr("Date", nowDate, "X-RateLimit-Reset", "59"),
			want: Reading{Policies: []Policy{pol("", "requests", no, no, no, 59*time.Second)}}},
		{name: "epoch seconds", h: hdr("Date", nowDate, "X-RateLimit-Reset", epoch(59*time.Second)),
			want: Reading{Policies: []Policy{pol("", "requests", no, no, no, 59*time.Second)}}},
		{name: "epoch milliseconds", h: hdr("Date", nowDate, "X-RateLimit-Reset", strconv.FormatInt(now.Add(1500*time.Millisecond).UnixMilli(), 10)),
			want: Reading{Policies: []Policy{pol("", "requests", no, no, no, 1500*time.Millisecond)}}},
		{name: "epoch in the past is 0", h: hdr("Date", nowDate, "X-RateLimit-Reset", epoch(-time.Hour)),
			want: Reading{Policies: []Policy{pol("", "requests", no, no, no, 0)}}},
		{name: "largest delta under the epoch threshold is over a year", h: hdr("X-RateLimit-Reset", "999999999")},
		{name: "epoch against a skewed local clock", h: hdr("Date", nowDate, "X-RateLimit-Reset", epoch(59*time.Second)),
			received: now.Add(-7 * time.Minute),
			want:     Reading{Policies: []Policy{pol("", "requests", no, no, no, 59*time.Second)}}},
		{name: "epoch without Date uses the receive time", h: hdr("X-RateLimit-Reset", epoch(59*time.Second)),
			received: now.Add(9 * time.Second),
			want:     Reading{Policies: []Policy{pol("", "requests", no, no, no, 50*time.Second)}}},
		{name: "invalid Date uses the receive time", h: hdr("Date", "yesterday", "X-RateLimit-Reset", epoch(59*time.Second)),
			want: Reading{Policies: []Policy{pol("", "requests", no, no, no, 59*time.Second)}}},
	})
}

// Typical responses for the benchmarks, as the vendors document them.
var (
	githubResponse = hdr(
		"Date", nowDate, "Content-Type", "application/json; charset=utf-8",
		"Cache-Control", "private, max-age=60, s-maxage=60", "Etag", `W/"a5f3d0e1"`,
		"X-Github-Media-Type", "github.v3; format=json", "X-Github-Api-Version-Selected", "2022-11-28",
		"X-Ratelimit-Limit", "5000", "X-Ratelimit-Remaining", "4999", "X-Ratelimit-Reset", epoch(time.Hour),
		"X-Ratelimit-Used", "1", "X-Ratelimit-Resource", "core", "X-Github-Request-Id", "CC54:3A5F:1B2E3C:1C4D5E:6834F5A4",
		"Server", "github.com", "Vary", "Accept, Authorization, Cookie, X-GitHub-OTP",
	)
	openAIResponse = hdr(
		"Date", nowDate, "Content-Type", "application/json", "Openai-Organization", "user-abc",
		"Openai-Processing-Ms", "312", "Openai-Version", "2020-10-01", "X-Request-Id", "req_8f7e6d5c",
		"X-Ratelimit-Limit-Requests", "60", "X-Ratelimit-Limit-Tokens", "150000",
		"X-Ratelimit-Remaining-Requests", "59", "X-Ratelimit-Remaining-Tokens", "149984",
		"X-Ratelimit-Reset-Requests", "1s", "X-Ratelimit-Reset-Tokens", "6m0s",
		"Cf-Ray", "8f1e2d3c4b5a6978-AMS", "Server", "cloudflare",
	)
)

func BenchmarkParse(b *testing.B) {
	for _, bc := range []struct {
		name string
		h    http.Header
	}{{"GitHub", githubResponse}, {"OpenAI", openAIResponse}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Parse(bc.h, now)
			}
		})
	}
}

func TestParseBoundsPolicies(t *testing.T) {
	// 400 policies a field, each field within maxFieldBytes: the policy
	// cap, not the byte budget, is what bounds them.
	var azure, ietf, named []byte
	for i := range 400 {
		azure = fmt.Appendf(azure, "p%d;%d,", i, i)
		ietf = fmt.Appendf(ietf, "%d;w=%d, ", i+1, i+1)
		named = fmt.Appendf(named, `"p%d";q=%d, `, i, i)
	}
	for _, h := range []http.Header{
		hdr("X-Ms-Ratelimit-Remaining-Resource", string(azure)),
		hdr("RateLimit-Limit", string(ietf[:len(ietf)-2])),
		hdr("RateLimit-Policy", string(named[:len(named)-2])),
		hdr("X-RateLimit-Limit", string(ietf[:len(ietf)-2])),
	} {
		q := Parse(h, now)
		if len(q.Policies) == 0 || len(q.Policies) > maxPolicies {
			t.Errorf("Parse(%.40s…) gave %d policies; want 1 to %d", fmt.Sprint(h), len(q.Policies), maxPolicies)
		}
		checkReading(t, q)
	}
}

func TestParseBindingAndWait(t *testing.T) {
	tests := []struct {
		name        string
		h           http.Header
		wantBinding Policy
		wantWait    time.Duration
		wantOK      bool
	}{
		{"OpenAI tokens spent",
			hdr("x-ratelimit-limit-requests", "60", "x-ratelimit-remaining-requests", "58", "x-ratelimit-reset-requests", "2s",
				"x-ratelimit-limit-tokens", "150000", "x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-tokens", "6m0s"),
			refilling(pol("", "tokens", 150000, 0, no, 6*time.Minute), no), 6 * time.Minute, true},
		{"GitHub secondary limit: Retry-After wins",
			hdr("Date", nowDate, "Retry-After", "60", "X-RateLimit-Limit", "5000", "X-RateLimit-Remaining", "4000",
				"X-RateLimit-Reset", epoch(time.Hour)),
			stated(pol("", "requests", 5000, 4000, no, time.Hour), now.Add(time.Hour)), time.Minute, true},
		{"gateway and app: the gateway is spent",
			hdr("RateLimit-Policy", `"gateway";q=10;w=1`, "RateLimit", `"gateway";r=0;t=1`,
				"X-RateLimit-Limit", "5000", "X-RateLimit-Remaining", "4999", "X-RateLimit-Reset", "3600"),
			pol("gateway", "requests", 10, 0, time.Second, time.Second), time.Second, true},
		{"per-second and per-day both spent: the longer reset",
			hdr("RateLimit-Policy", `"s";q=10;w=1, "d";q=1000;w=86400`, "RateLimit", `"s";r=0;t=1, "d";r=0;t=7200`),
			pol("d", "requests", 1000, 0, 24*time.Hour, 2*time.Hour), 2 * time.Hour, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := Parse(tt.h, now)
			if got, ok := q.Binding(); !ok || !policyEqual(got, tt.wantBinding) {
				t.Errorf("Binding() = %+v, %v; want %+v, true", got, ok, tt.wantBinding)
			}
			if got, ok := q.Wait(); got != tt.wantWait || ok != tt.wantOK {
				t.Errorf("Wait() = %v, %v; want %v, %v", got, ok, tt.wantWait, tt.wantOK)
			}
		})
	}
}

// TestParseImplausibleDate checks that a Date more than a day from
// the receive time is ignored: measured against it, a short Retry-After
// date became a long wait, and a spent window no wait at all.
func TestParseImplausibleDate(t *testing.T) {
	date := func(d time.Duration) string { return now.Add(d).UTC().Format(http.TimeFormat) }
	runCases(t, []readingCase{
		{name: "Date 10 days behind: Retry-After date measured against the receive time",
			h:    hdr("Date", date(-10*24*time.Hour), "Retry-After", date(30*time.Second)),
			want: Reading{RetryAfter: 30 * time.Second, HasRetryAfter: true}},
		{name: "Date 10 days ahead: a spent window still waits for its reset",
			h:    hdr("Date", date(10*24*time.Hour), "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", epoch(time.Minute)),
			want: Reading{Policies: []Policy{pol("", "requests", no, 0, no, time.Minute)}}},
		{name: "Date 2000-01-01 (a server whose clock was never set)",
			h:    hdr("Date", "Sat, 01 Jan 2000 00:00:00 GMT", "Anthropic-Ratelimit-Tokens-Remaining", "0", "Anthropic-Ratelimit-Tokens-Reset", "2025-05-26T05:00:16Z"),
			want: Reading{Policies: []Policy{refilling(pol("", "tokens", no, 0, no, 12*time.Second), no)}}},
		{name: "Date 23 hours ahead is skew: it is the clock",
			h:    hdr("Date", date(23*time.Hour), "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", epoch(23*time.Hour+time.Minute)),
			want: Reading{Policies: []Policy{pol("", "requests", no, 0, no, time.Minute)}}},
		{name: "an implausible Date line is passed over for a plausible one",
			h:    http.Header{"Date": {date(-72 * time.Hour), nowDate}, "Retry-After": {date(5 * time.Second)}},
			want: Reading{RetryAfter: 5 * time.Second, HasRetryAfter: true}},
	})
}

// TestParseNothingToRead: a response with no field of any dialect (most
// responses: a Date, a Content-Type) reads as the zero Reading, which
// Parse returns without asking each dialect: every dialect reads nothing
// from no fields.
func TestParseNothingToRead(t *testing.T) {
	for _, tt := range []struct {
		name string
		h    http.Header
	}{
		{"empty", http.Header{}},
		{"date", http.Header{"Date": {now.Format(http.TimeFormat)}}},
		{"broken date", http.Header{"Date": {"yesterday"}}},
		{"others", http.Header{
			"Date": {now.Format(http.TimeFormat)}, "Content-Type": {"application/json"},
			"X-Request-Id": {"abc"}, "Server": {"nginx"}, "Retry": {"5"}, "Cache-Control": {"no-store"},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var st state
			if st.f.collect(tt.h) {
				t.Fatalf("collect(%v) found a dialect's field; want none", tt.h)
			}
			// What Parse would read without its shortcut.
			st.c = clock{date: st.f.vals(slotDate), received: now}
			st.f.readAll(&st.r, &st.c)
			st.r.tidy()
			if !reflect.DeepEqual(st.r, Reading{}) {
				t.Errorf("the dialects read %+v from %v; want the zero Reading", st.r, tt.h)
			}
			if got := Parse(tt.h, now); !reflect.DeepEqual(got, Reading{}) {
				t.Errorf("Parse(%v) = %+v; want the zero Reading", tt.h, got)
			}
		})
	}
}

// stated returns p with its reset stated as the instant at.
func stated(p Policy, at time.Time) Policy {
	p.ResetAt = at
	return p
}

// TestParseResetAt: a reset stated as an instant keeps the instant, as
// the server stated it, whatever the Date it is measured against; a
// delay states none, and where both are given the one read wins with
// its instant or none.
func TestParseResetAt(t *testing.T) {
	at := now.Add(59 * time.Second)
	for _, tc := range []struct {
		name     string
		h        http.Header
		received time.Time
		reset    time.Duration
		at       time.Time
	}{
		{"epoch seconds", hdr("Date", nowDate, "X-RateLimit-Reset", epoch(59*time.Second)), now, 59 * time.Second, at},
		{"epoch seconds, Date a second on", hdr("Date", "Mon, 26 May 2025 05:00:05 GMT", "X-RateLimit-Reset", epoch(59*time.Second)), now, 58 * time.Second, at},
		{"epoch without Date", hdr("X-RateLimit-Reset", epoch(59*time.Second)), now.Add(9 * time.Second), 50 * time.Second, at},
		{"epoch milliseconds", hdr("Date", nowDate, "X-RateLimit-Reset", strconv.FormatInt(now.Add(1500*time.Millisecond).UnixMilli(), 10)), now, 1500 * time.Millisecond, now.Add(1500 * time.Millisecond)},
		{"epoch past", hdr("Date", nowDate, "X-RateLimit-Reset", epoch(-time.Hour)), now, 0, now.Add(-time.Hour)},
		{"RFC 3339", hdr("Date", nowDate, "Anthropic-Ratelimit-Requests-Limit", "50", "Anthropic-Ratelimit-Requests-Remaining", "49",
			"Anthropic-Ratelimit-Requests-Reset", at.Format(time.RFC3339)), now, 59 * time.Second, at},
		{"delta seconds", hdr("Date", nowDate, "X-RateLimit-Reset", "59"), now, 59 * time.Second, time.Time{}},
		{"IETF t", hdr("Date", nowDate, "RateLimit-Policy", `"d";q=10;w=60`, "RateLimit", `"d";r=3;t=59`), now, 59 * time.Second, time.Time{}},
		{"Discord: Reset-After wins over the epoch", hdr("Date", nowDate, "X-RateLimit-Reset", epoch(59*time.Second), "X-RateLimit-Reset-After", "58.5"), now, 58500 * time.Millisecond, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := Parse(tc.h, tc.received)
			i := slices.IndexFunc(q.Policies, func(p Policy) bool { return p.HasReset })
			if i < 0 {
				t.Fatalf("Parse(%v): no reset in %s", tc.h, fmtReading(q))
			}
			if p := q.Policies[i]; p.Reset != tc.reset || !p.ResetAt.Equal(tc.at) {
				t.Errorf("Parse(%v): Reset %v, ResetAt %v; want %v, %v", tc.h, p.Reset, p.ResetAt, tc.reset, tc.at)
			}
		})
	}
}
