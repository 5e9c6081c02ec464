package ratelimit

import (
	"testing"
	"time"
)

func TestParseIETF(t *testing.T) {
	withPK := func(p Policy, pk string) Policy { p.Partition = pk; return p }
	runCases(t, []readingCase{
		// draft-ietf-httpapi-ratelimit-headers-02 §3.1's example.
		{name: "draft-02 limit list",
			h: hdr("RateLimit-Limit", "10, 10;w=1, 50;w=60", "RateLimit-Remaining", "9", "RateLimit-Reset", "1"),
			want: Reading{Policies: []Policy{
				pol("", "requests", 10, 9, time.Second, time.Second),
				pol("", "requests", 50, no, time.Minute, no),
			}}},
		// draft-polli-ratelimit-headers-00 spelled the window "window".
		{name: "window= spelling",
			h:    hdr("RateLimit-Limit", "100, 100;window=60", "RateLimit-Remaining", "0", "RateLimit-Reset", "48"),
			want: Reading{Policies: []Policy{pol("", "requests", 100, 0, time.Minute, 48*time.Second)}}},
		// draft-ietf-httpapi-ratelimit-headers-06 moved the policies to
		// RateLimit-Policy.
		{name: "draft-06 RateLimit-Policy",
			h: hdr("RateLimit-Limit", "10", "RateLimit-Remaining", "1", "RateLimit-Reset", "7",
				"RateLimit-Policy", "10;w=1, 50;w=60"),
			want: Reading{Policies: []Policy{
				pol("", "requests", 10, 1, time.Second, 7*time.Second),
				pol("", "requests", 50, no, time.Minute, no),
			}}},
		// draft-ietf-httpapi-ratelimit-headers-07 §5's example.
		{name: "draft-07 dictionary",
			h:    hdr("RateLimit", "limit=100, remaining=50, reset=5", "RateLimit-Policy", "100;w=60"),
			want: Reading{Policies: []Policy{pol("", "requests", 100, 50, time.Minute, 5*time.Second)}}},
		{name: "draft-07 wrong types are absent",
			h:    hdr("RateLimit", `limit=100, remaining="50", reset=5.5`),
			want: Reading{Policies: []Policy{pol("", "requests", 100, no, no, no)}}},
		// draft-ietf-httpapi-ratelimit-headers-10 §3 and §4.
		{name: "draft-08+ named policies matched by name",
			h: hdr("RateLimit-Policy", `"burst";q=100;w=60, "daily";q=1000;w=86400`,
				"RateLimit", `"burst";r=50;t=30`),
			want: Reading{Policies: []Policy{
				pol("burst", "requests", 100, 50, time.Minute, 30*time.Second),
				pol("daily", "requests", 1000, no, 24*time.Hour, no),
			}}},
		{name: "draft-08+ split across field lines",
			h: hdr("RateLimit-Policy", `"burst";q=100;w=60`, "RateLimit-Policy", `"daily";q=1000;w=86400`,
				"RateLimit", `"daily";r=0;t=3600`, "RateLimit", `"burst";r=99;t=1`),
			want: Reading{Policies: []Policy{
				pol("burst", "requests", 100, 99, time.Minute, time.Second),
				pol("daily", "requests", 1000, 0, 24*time.Hour, time.Hour),
			}}},
		{name: "draft-08+ qu and pk",
			h: hdr("RateLimit-Policy", `"peruser";q=65535;qu="content-bytes";w=10;pk=:dXNlcjEyMw==:`,
				"RateLimit", `"peruser";r=1024;t=2;pk=:dXNlcjEyMw==:`),
			want: Reading{Policies: []Policy{
				withPK(pol("peruser", "content-bytes", 65535, 1024, 10*time.Second, 2*time.Second), "user123"),
			}}},
		{name: "draft-08+ RateLimit without a policy",
			h:    hdr("RateLimit", `"default";r=0;t=12`),
			want: Reading{Policies: []Policy{pol("default", "requests", no, 0, no, 12*time.Second)}}},
		{name: "draft-08+ token names",
			h:    hdr("RateLimit-Policy", `burst;q=10;w=1`, "RateLimit", `burst;r=3;t=1`),
			want: Reading{Policies: []Policy{pol("burst", "requests", 10, 3, time.Second, time.Second)}}},
		{name: "draft-08+ wrong parameter types are absent, the member kept",
			h: hdr("RateLimit-Policy", `"a";q="100";w=1.5, "b";q=-1;w=-60, "c";q=5;w=0`,
				"RateLimit", `"a";r=-1;t="30", "b";r=2.5;t=?1, "c";r=5;t=5`),
			want: Reading{Policies: []Policy{
				pol("c", "requests", 5, 5, no, 5*time.Second),
			}}},
		{name: "a malformed field is ignored whole, the others kept",
			h: hdr("RateLimit-Policy", `"burst";q=100;w=60, "daily";q=1000;w=`,
				"RateLimit", `"burst";r=50;t=30`),
			want: Reading{Policies: []Policy{pol("burst", "requests", no, 50, no, 30*time.Second)}}},
		{name: "a malformed RateLimit is ignored whole",
			h:    hdr("RateLimit-Policy", `"burst";q=100;w=60`, "RateLimit", `"burst";r=50;t=30,,`),
			want: Reading{Policies: []Policy{pol("burst", "requests", 100, no, time.Minute, no)}}},
		{name: "Retry-After wins over a longer reset",
			h: hdr("RateLimit-Policy", `"daily";q=1000;w=86400`, "RateLimit", `"daily";r=0;t=3600`,
				"Retry-After", "10"),
			want: Reading{Policies: []Policy{pol("daily", "requests", 1000, 0, 24*time.Hour, time.Hour)},
				RetryAfter: 10 * time.Second, HasRetryAfter: true}},
		// GitLab: RateLimit-Reset is an epoch, RateLimit-ResetTime an
		// HTTP-date, RateLimit-Observed the count used.
		// https://docs.gitlab.com/administration/settings/user_and_ip_rate_limits/
		{name: "GitLab",
			h: hdr("Date", "Tue, 05 Jan 2021 10:59:30 GMT", "RateLimit-Limit", "60", "RateLimit-Observed", "67",
				"RateLimit-Remaining", "0", "RateLimit-Reset", "1609844400",
				"RateLimit-ResetTime", "Tue, 05 Jan 2021 11:00:00 GMT", "Retry-After", "30"),
			received: near("Tue, 05 Jan 2021 10:59:30 GMT", 2*time.Minute),
			want: Reading{Policies: []Policy{pol("", "requests", 60, 0, no, 30*time.Second)},
				RetryAfter: 30 * time.Second, HasRetryAfter: true}},
		{name: "GitLab ResetTime alone",
			h: hdr("Date", "Tue, 05 Jan 2021 10:59:30 GMT", "RateLimit-Remaining", "0",
				"RateLimit-ResetTime", "Tue, 05 Jan 2021 11:00:00 GMT"),
			received: near("Tue, 05 Jan 2021 10:59:30 GMT", -2*time.Minute),
			want:     Reading{Policies: []Policy{pol("", "requests", no, 0, no, 30*time.Second)}}},
		// Docker Hub: https://docs.docker.com/docker-hub/usage/pulls/
		{name: "Docker Hub",
			h: hdr("ratelimit-limit", "100;w=21600", "ratelimit-remaining", "76;w=21600",
				"docker-ratelimit-source", "192.0.2.1"),
			want: Reading{Policies: []Policy{pol("", "requests", 100, 76, 6*time.Hour, no)}}},
		{name: "trio with invalid values",
			h:    hdr("RateLimit-Limit", "ten", "RateLimit-Remaining", "-3", "RateLimit-Reset", "+5"),
			want: Reading{}},
	})
}

func TestParseIETFDoesNotModifyHeaders(t *testing.T) {
	h := hdr("RateLimit-Policy", `"burst";q=100;w=60`, "RateLimit", `"burst";r=50;t=30`,
		"X-RateLimit-Limit", "10, 10;w=60")
	before := h.Clone()
	Parse(h, now)
	for k, v := range before {
		if got := h[k]; len(got) != len(v) || (len(v) > 0 && got[0] != v[0]) {
			t.Errorf("Parse changed %s: %q, was %q", k, got, v)
		}
	}
	if len(h) != len(before) {
		t.Errorf("Parse changed the header count: %d, was %d", len(h), len(before))
	}
}

// TestParseIETFDelaySeconds checks that the fields the drafts define
// as delay-seconds are never read as epochs: a t or reset the size of an
// epoch is over a year, so absent, not a time a minute away.
func TestParseIETFDelaySeconds(t *testing.T) {
	inAMinute := epoch(time.Minute)
	runCases(t, []readingCase{
		// draft-ietf-httpapi-ratelimit-headers-10: t is delay-seconds.
		{name: "draft-08+ t the size of an epoch",
			h:    hdr("Date", nowDate, "RateLimit", `"burst";r=0;t=`+inAMinute),
			want: Reading{Policies: []Policy{pol("burst", "requests", no, 0, no, no)}}},
		{name: "draft-08+ t of a year exactly is kept",
			h:    hdr("RateLimit", `"y";r=0;t=31536000`),
			want: Reading{Policies: []Policy{pol("y", "requests", no, 0, no, maxWait)}}},
		// draft-ietf-httpapi-ratelimit-headers-07: reset is delay-seconds.
		{name: "draft-07 reset the size of an epoch",
			h:    hdr("Date", nowDate, "RateLimit", "limit=100, remaining=0, reset="+inAMinute),
			want: Reading{Policies: []Policy{pol("", "requests", 100, 0, no, no)}}},
		// GitLab's RateLimit-Reset is an epoch: the trio keeps the guess.
		{name: "trio RateLimit-Reset still takes an epoch",
			h:    hdr("Date", nowDate, "RateLimit-Remaining", "0", "RateLimit-Reset", inAMinute),
			want: Reading{Policies: []Policy{pol("", "requests", no, 0, no, time.Minute)}}},
	})
}
