package throttletest_test

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/throttle-go/throttle/throttletest"
)

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
