package throttletest_test

import (
	"fmt"
	"net/http"
	"strconv"
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
