package throttletest_test

import (
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/throttle-go/throttle/throttletest"
)

// TestGitHub checks the long window, started part-spent, its reset and its
// next window.
func TestGitHub(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		toPresent()
		s := throttletest.NewGitHub(5000, time.Hour)
		s.Used, s.ResetIn = 4550, 50*time.Minute
		start := time.Now()
		a := send(t, s, "")
		p := onlyPolicy(t, parseQuota(a.header, a.at))
		if a.status != 200 || p.Limit != 5000 || p.Remaining != 449 || p.Reset != 50*time.Minute || p.Name != "core" {
			t.Errorf("first answer %d, policy %+v; want 200, core: 449 of 5000 left, reset in 50m", a.status, p)
		}
		if a.header.Get("X-Ratelimit-Used") != "4551" {
			t.Errorf("x-ratelimit-used %q; want 4551", a.header.Get("X-Ratelimit-Used"))
		}

		g := throttletest.NewGitHub(3, time.Minute)
		g.Used, g.ResetIn = 1, 10*time.Second
		var codes []int
		for range 3 {
			codes = append(codes, send(t, g, "").status)
		}
		if fmt.Sprint(codes) != "[200 200 403]" {
			t.Errorf("2 left: %v; want [200 200 403]", codes)
		}
		sleepUntil(start, 10*time.Second)
		a = send(t, g, "")
		p = onlyPolicy(t, parseQuota(a.header, a.at))
		if a.status != 200 || p.Remaining != 2 || p.Reset != time.Minute {
			t.Errorf("after the reset: %d %+v; want 200, 2 left, reset in 1m", a.status, p)
		}
		if got := g.PerWindow(start, 10*time.Second); fmt.Sprint(got) != "[2 1]" {
			t.Errorf("PerWindow = %v; want [2 1]", got)
		}
	})
}

// TestGitHubSecondary checks the secondary limit: Retry-After: 60, the
// primary count untouched, and a free slot a minute after the oldest.
func TestGitHubSecondary(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		toPresent()
		s := throttletest.NewGitHub(100, time.Hour)
		s.SecondaryPerMinute = 2
		start := time.Now()
		send(t, s, "")
		sleepUntil(start, 30*time.Second)
		send(t, s, "")
		a := send(t, s, "")
		if a.status != 403 || a.header.Get("Retry-After") != "60" || !strings.Contains(a.body, "secondary rate limit") {
			t.Errorf("third in a minute: %d %q %s; want 403, Retry-After 60, secondary", a.status, a.header.Get("Retry-After"), a.body)
		}
		if p := onlyPolicy(t, parseQuota(a.header, a.at)); p.Remaining != 98 {
			t.Errorf("remaining %d after a secondary refusal; want 98 (it spends nothing)", p.Remaining)
		}
		sleepUntil(start, time.Minute)
		if a := send(t, s, ""); a.status != 200 {
			t.Errorf("a minute after the first: %d; want 200", a.status)
		}
	})
}

// TestOpenAI checks the two refilling buckets, their headers, the 429's
// waits and the usage body.
func TestOpenAI(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := throttletest.NewOpenAI(60, 6000)
		s.PromptTokens = 2
		s.Used = 0.5
		body := `{"model":"gpt","max_tokens":200,"messages":[]}`
		a := send(t, s, body)
		for k, want := range map[string]string{
			"X-Ratelimit-Remaining-Requests": "59",
			"X-Ratelimit-Remaining-Tokens":   "5798",
			"X-Ratelimit-Reset-Requests":     "1s",
			"X-Ratelimit-Reset-Tokens":       "2.02s",
		} {
			if got := a.header.Get(k); got != want {
				t.Errorf("%s: %q; want %q", k, got, want)
			}
		}
		if !strings.Contains(a.body, `"usage":{"prompt_tokens":2,"completion_tokens":100,"total_tokens":102}`) {
			t.Errorf("body %s; want usage 2+100", a.body)
		}
		q := parseQuota(a.header, a.at)
		units := map[string]int64{}
		for _, p := range q.Policies {
			units[p.Unit] = p.Remaining
		}
		if units["requests"] != 59 || units["tokens"] != 5798 {
			t.Errorf("parsed %+v; want 59 requests and 5798 tokens remaining", q.Policies)
		}
		// 28 more spend 5,656 more tokens: 142 left, short of 202.
		for range 28 {
			if a := send(t, s, body); a.status != 200 {
				t.Fatalf("status %d; want 200", a.status)
			}
		}
		a = send(t, s, body)
		if a.status != 429 || a.header.Get("Retry-After-Ms") != "600" || a.header.Get("Retry-After") != "1" {
			t.Errorf("30th: %d retry-after-ms %q retry-after %q; want 429, 600, 1 (60 tokens at 100/s)",
				a.status, a.header.Get("Retry-After-Ms"), a.header.Get("Retry-After"))
		}
		if q := parseQuota(a.header, a.at); !q.HasRetryAfter || q.RetryAfter != 600*time.Millisecond {
			t.Errorf("parsed retry-after %v %v; want 600ms", q.RetryAfter, q.HasRetryAfter)
		}
		time.Sleep(599 * time.Millisecond)
		if a := send(t, s, body); a.status != 429 {
			t.Errorf("1 ms early: %d; want 429", a.status)
		}
		time.Sleep(time.Millisecond)
		if a := send(t, s, body); a.status != 200 {
			t.Errorf("at the wait's end: %d; want 200", a.status)
		}
		if st := s.Stats(); st.Admitted != 30 || st.Rejected != 2 || st.Units != 30*202 {
			t.Errorf("Stats() = %+v; want 30 admitted, 2 rejected, %d units", st, 30*202)
		}
		// A request larger than the bucket is refused with no wait to give.
		a = send(t, s, `{"max_tokens":7000}`)
		if a.status != 429 || a.header.Get("Retry-After") != "" || a.header.Get("Retry-After-Ms") != "" {
			t.Errorf("7000 tokens: %d %v; want 429 without a wait", a.status, a.header)
		}
	})
}
