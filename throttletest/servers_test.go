package throttletest_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/throttle-go/throttle/throttletest"
)

// TestSlidingWindow checks httprate's weighted count and its headers.
func TestSlidingWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		toPresent()
		s := throttletest.NewSlidingWindow(10, time.Second)
		start := time.Now() // a whole second
		var codes []int
		for range 15 {
			a := send(t, s, "")
			codes = append(codes, a.status)
			p := onlyPolicy(t, parseQuota(a.header, a.at))
			if p.Limit != 10 || p.Reset != time.Second {
				t.Errorf("policy %+v; want limit 10, reset 1s", p)
			}
			if a.header.Get("X-RateLimit-Reset") != strconv.FormatInt(start.Unix()+1, 10) {
				t.Errorf("X-RateLimit-Reset %q; want %d", a.header.Get("X-RateLimit-Reset"), start.Unix()+1)
			}
			if a.status == 429 && a.header.Get("Retry-After") != "1" {
				t.Errorf("429 with Retry-After %q; want 1", a.header.Get("Retry-After"))
			}
		}
		if got := fmt.Sprint(codes); got != fmt.Sprint(statuses(10, 200, 5, 429)) {
			t.Errorf("a burst of 15: %v; want 10 admitted then 5 refused", got)
		}
		// Half-way through the next window the previous one weighs 5.
		sleepUntil(start, 1500*time.Millisecond)
		var remaining []int64
		codes = codes[:0]
		for range 8 {
			a := send(t, s, "")
			codes = append(codes, a.status)
			remaining = append(remaining, onlyPolicy(t, parseQuota(a.header, a.at)).Remaining)
		}
		if got := fmt.Sprint(codes); got != fmt.Sprint(statuses(5, 200, 3, 429)) {
			t.Errorf("at 1.5s: %v; want 5 admitted then refused", got)
		}
		if got := fmt.Sprint(remaining); got != "[4 3 2 1 0 0 0 0]" {
			t.Errorf("remaining at 1.5s: %v; want [4 3 2 1 0 0 0 0]", got)
		}
		// Two windows later nothing weighs.
		sleepUntil(start, 3*time.Second)
		if a := send(t, s, ""); a.status != 200 || a.header.Get("X-RateLimit-Remaining") != "9" {
			t.Errorf("at 3s: %d remaining %q; want 200, 9", a.status, a.header.Get("X-RateLimit-Remaining"))
		}
		if st := s.Stats(); st.Admitted != 16 || st.Rejected != 8 {
			t.Errorf("Stats() = %+v; want 16 admitted, 8 rejected", st)
		}
	})
}

// TestFixedWindow checks the IETF fields, t rounded up, and the skewed Date.
func TestFixedWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := throttletest.NewFixedWindow(5, time.Second)
		s.DateSkew = 3 * time.Second
		s.RetryAfter = true
		start := time.Now()
		sleepUntil(start, 900*time.Millisecond)
		for i := range 6 {
			a := send(t, s, "")
			wantStatus := 200
			if i == 5 {
				wantStatus = 429
			}
			left := max(4-i, 0)
			if a.status != wantStatus {
				t.Errorf("request %d: status %d; want %d", i, a.status, wantStatus)
			}
			if got, want := a.header.Get("RateLimit"), fmt.Sprintf(`"default";r=%d;t=1`, left); got != want {
				t.Errorf("request %d: RateLimit %q; want %q (a reset 0.1 s away rounds up to 1)", i, got, want)
			}
			if got, want := a.header.Get("Date"), start.Add(3*time.Second).UTC().Format(http.TimeFormat); got != want {
				t.Errorf("Date %q; want %q (3 s skew)", got, want)
			}
			p := onlyPolicy(t, parseQuota(a.header, a.at))
			if p.Limit != 5 || p.Window != time.Second || p.Remaining != int64(left) || p.Reset != time.Second || p.Name != "default" {
				t.Errorf("request %d: policy %+v; want default, 5 per 1s, %d left, reset 1s", i, p, left)
			}
			if i == 5 && a.header.Get("Retry-After") != "1" {
				t.Errorf("429 with Retry-After %q; want 1", a.header.Get("Retry-After"))
			}
		}
		sleepUntil(start, time.Second)
		if a := send(t, s, ""); a.status != 200 || a.header.Get("RateLimit") != `"default";r=4;t=1` {
			t.Errorf("at the next window: %d %q; want 200 with r=4", a.status, a.header.Get("RateLimit"))
		}
		if most, _ := s.MaxIn(200 * time.Millisecond); most != 6 {
			t.Errorf("MaxIn(200ms) = %d; want 6 (5 before the reset and 1 after)", most)
		}
	})
}

// TestSlidingLog checks the rolling budget: at most Limit in any Window,
// and nothing but Retry-After.
func TestSlidingLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := throttletest.NewSlidingLog(3, time.Second)
		start := time.Now()
		steps := []struct {
			at         time.Duration
			want       int
			retryAfter string
		}{
			{0, 200, ""},
			{200 * time.Millisecond, 200, ""},
			{400 * time.Millisecond, 200, ""},
			{500 * time.Millisecond, 429, "1"},
			{time.Second, 200, ""}, // the admission at 0 leaves at exactly 1 s
			{1100 * time.Millisecond, 429, "1"},
			{1200 * time.Millisecond, 200, ""},
		}
		for _, st := range steps {
			sleepUntil(start, st.at)
			a := send(t, s, "")
			if a.status != st.want || a.header.Get("Retry-After") != st.retryAfter {
				t.Errorf("at %v: %d Retry-After %q; want %d %q", st.at, a.status, a.header.Get("Retry-After"), st.want, st.retryAfter)
			}
			q := parseQuota(a.header, a.at)
			if len(q.Policies) != 0 {
				t.Errorf("at %v: policies %+v; want none", st.at, q.Policies)
			}
			if st.want == 429 && (!q.HasRetryAfter || q.RetryAfter != time.Second) {
				t.Errorf("at %v: Retry-After parsed %v %v; want 1s", st.at, q.RetryAfter, q.HasRetryAfter)
			}
		}
		if most, _ := s.MaxIn(time.Second); most != 3 {
			t.Errorf("MaxIn(1s) = %d; want 3", most)
		}
	})
}

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

// statuses is n1 times s1 then n2 times s2.
func statuses(n1, s1, n2, s2 int) []int {
	var out []int
	for range n1 {
		out = append(out, s1)
	}
	for range n2 {
		out = append(out, s2)
	}
	return out
}

// TestTokenBucket checks the burst, the refill and the optional Retry-After.
func TestTokenBucket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := throttletest.NewTokenBucket(10, 3)
		s.RetryAfter = true
		start := time.Now()
		var codes []int
		for range 4 {
			codes = append(codes, send(t, s, "").status)
		}
		if fmt.Sprint(codes) != "[200 200 200 429]" {
			t.Errorf("a burst of 4: %v; want 3 admitted", codes)
		}
		sleepUntil(start, 99*time.Millisecond)
		if a := send(t, s, ""); a.status != 429 || a.header.Get("Retry-After") != "1" {
			t.Errorf("at 99ms: %d %q; want 429 with Retry-After 1", a.status, a.header.Get("Retry-After"))
		}
		sleepUntil(start, 100*time.Millisecond)
		if a := send(t, s, ""); a.status != 200 {
			t.Errorf("at 100ms: %d; want 200", a.status)
		}
		sleepUntil(start, 10*time.Second)
		codes = codes[:0]
		for range 4 {
			codes = append(codes, send(t, s, "").status)
		}
		if fmt.Sprint(codes) != "[200 200 200 429]" {
			t.Errorf("refilled: %v; want the burst of 3 again, no more", codes)
		}
	})
}

// TestInFlight checks the concurrency cap: Limit at once, the next refused,
// a slot free again when one ends.
func TestInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := throttletest.NewInFlight(2, 100*time.Millisecond)
		s.RetryAfter = true
		codes := make(chan int, 3)
		for range 2 {
			go func() {
				a, err := trySend(s, "")
				if err != nil {
					a.status = -1 // reported by the test below
				}
				codes <- a.status
			}()
		}
		synctest.Wait() // both are being served
		if a := send(t, s, ""); a.status != 429 || a.header.Get("Retry-After") != "1" {
			t.Errorf("a third at once: %d %q; want 429 with Retry-After 1", a.status, a.header.Get("Retry-After"))
		}
		if c1, c2 := <-codes, <-codes; c1 != 200 || c2 != 200 {
			t.Errorf("the two served: %d %d; want 200 200", c1, c2)
		}
		if a := send(t, s, ""); a.status != 200 {
			t.Errorf("after they ended: %d; want 200", a.status)
		}
		if s.Peak() != 2 {
			t.Errorf("Peak() = %d; want 2", s.Peak())
		}
		if st := s.Stats(); st.Admitted != 3 || st.Rejected != 1 {
			t.Errorf("Stats() = %+v; want 3 admitted, 1 rejected", st)
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

// TestSlidingWindowResetDelta checks the delta form of X-RateLimit-Reset.
func TestSlidingWindowResetDelta(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := throttletest.NewSlidingWindow(10, 10*time.Second)
		s.ResetDelta = true
		time.Sleep(2500 * time.Millisecond)
		a := send(t, s, "")
		if got := a.header.Get("X-RateLimit-Reset"); got != "8" {
			t.Errorf("X-RateLimit-Reset %q; want 8 (7.5 s rounded up)", got)
		}
		if p := onlyPolicy(t, parseQuota(a.header, a.at)); p.Reset != 8*time.Second || p.Remaining != 9 {
			t.Errorf("policy %+v; want reset 8s, 9 remaining", p)
		}
	})
}

// TestChain checks layered limits: the first refusal answers, the headers
// of every layer passed are sent, and each layer counts what reached it.
func TestChain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		toPresent()
		per := throttletest.NewTokenBucket(10, 3)
		per.RetryAfter = true
		budget := throttletest.NewGitHub(4, time.Hour)
		c := throttletest.NewChain(per, budget)
		var codes []int
		for range 4 {
			a := send(t, c, "")
			codes = append(codes, a.status)
			if a.status == 200 && a.header.Get("X-Ratelimit-Limit") != "4" {
				t.Errorf("admitted without the budget's headers: %v", a.header)
			}
			if a.status == 429 && (a.header.Get("Retry-After") != "1" || a.header.Get("X-Ratelimit-Limit") != "") {
				t.Errorf("refused by the first layer: %v; want its Retry-After only", a.header)
			}
		}
		time.Sleep(time.Second)
		for range 2 {
			codes = append(codes, send(t, c, "").status)
		}
		if fmt.Sprint(codes) != "[200 200 200 429 200 403]" {
			t.Errorf("statuses %v; want the bucket's burst of 3, its refusal, then the budget's 4th and its refusal", codes)
		}
		if st := per.Stats(); st.Arrivals != 6 || st.Admitted != 5 {
			t.Errorf("first layer %+v; want 6 arrivals, 5 admitted", st)
		}
		if st := budget.Stats(); st.Arrivals != 5 || st.Admitted != 4 {
			t.Errorf("second layer %+v; want 5 arrivals, 4 admitted", st)
		}
		if st := c.Stats(); st.Arrivals != 6 || st.Admitted != 4 || st.Rejected != 2 {
			t.Errorf("chain %+v; want 6 arrivals, 4 admitted, 2 rejected", st)
		}
		q := parseQuota(send(t, throttletest.NewChain(throttletest.NewFixedWindow(5, time.Second), throttletest.NewGitHub(10, time.Hour)), "").header, time.Now())
		if len(q.Policies) != 2 {
			t.Errorf("two layers' headers parse to %+v; want 2 policies", q.Policies)
		}
		// Both OpenAI layers read the body's max_tokens.
		o1, o2 := throttletest.NewOpenAI(60, 1000), throttletest.NewOpenAI(60, 1000)
		send(t, throttletest.NewChain(o1, o2), `{"max_tokens":300}`)
		if o1.Stats().Units != 300 || o2.Stats().Units != 300 {
			t.Errorf("tokens charged %d and %d; want 300 by each layer", o1.Stats().Units, o2.Stats().Units)
		}
	})
}
