package ratelimit_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/throttle-go/throttle/ratelimit"
)

// An OpenAI response carries a requests policy and a tokens policy; the one
// with the least remaining binds.
func ExampleParse() {
	h := http.Header{}
	h.Set("x-ratelimit-limit-requests", "60")
	h.Set("x-ratelimit-limit-tokens", "150000")
	h.Set("x-ratelimit-remaining-requests", "59")
	h.Set("x-ratelimit-remaining-tokens", "149984")
	h.Set("x-ratelimit-reset-requests", "1s")
	h.Set("x-ratelimit-reset-tokens", "6m0s")

	r := ratelimit.Parse(h, time.Now())
	for _, p := range r.Policies {
		fmt.Printf("%s: %d of %d left, resets in %v\n", p.Unit, p.Remaining, p.Limit, p.Reset)
	}
	p, _ := r.Binding()
	fmt.Println("binding:", p.Unit)
	wait, ok := r.Wait()
	fmt.Println("wait:", wait, ok)
	// Output:
	// requests: 59 of 60 left, resets in 1s
	// tokens: 149984 of 150000 left, resets in 6m0s
	// binding: requests
	// wait: 0s true
}

// A 429 with the IETF fields: the exhausted policy binds, and Retry-After
// decides the wait even though the policy's reset is longer.
func ExampleReading_Wait() {
	h := http.Header{}
	h.Add("RateLimit-Policy", `"burst";q=100;w=60, "daily";q=1000;w=86400`)
	h.Add("RateLimit", `"burst";r=40;t=30, "daily";r=0;t=3600`)
	h.Set("Retry-After", "120")

	r := ratelimit.Parse(h, time.Now())
	p, _ := r.Binding()
	fmt.Printf("binding: %q, %d left, resets in %v\n", p.Name, p.Remaining, p.Reset)
	wait, ok := r.Wait()
	fmt.Println("wait:", wait, ok)
	// Output:
	// binding: "daily", 0 left, resets in 1h0m0s
	// wait: 2m0s true
}

// GitHub's reset is an epoch; it is measured against the response's Date,
// so a local clock that is minutes off gives the same wait.
func ExampleReading_Binding() {
	h := http.Header{}
	h.Set("Date", "Mon, 01 Jul 2013 17:27:53 GMT")
	h.Set("X-RateLimit-Limit", "60")
	h.Set("X-RateLimit-Remaining", "0")
	h.Set("X-RateLimit-Reset", "1372700873")
	h.Set("X-RateLimit-Resource", "core")

	skewed := time.Date(2013, 7, 1, 17, 31, 0, 0, time.UTC) // 3 min fast
	r := ratelimit.Parse(h, skewed)
	p, _ := r.Binding()
	fmt.Printf("%s: exhausted %v, resets in %v\n", p.Name, p.Exhausted(), p.Reset)
	// Output:
	// core: exhausted true, resets in 20m0s
}

func ExampleParseRetryAfter() {
	date := time.Date(1994, 11, 6, 8, 49, 7, 0, time.UTC)
	for _, v := range []string{"120", "2.0", "Sun, 06 Nov 1994 08:49:37 GMT", "-1", "soon"} {
		d, ok := ratelimit.ParseRetryAfter(v, date, time.Now())
		fmt.Printf("%q: %v %v\n", v, d, ok)
	}
	// Output:
	// "120": 2m0s true
	// "2.0": 2s true
	// "Sun, 06 Nov 1994 08:49:37 GMT": 30s true
	// "-1": 0s false
	// "soon": 0s false
}

// A reset stated as an instant (GitHub's epoch seconds) is measured
// against the response's Date, which counts whole seconds: two responses
// of one window read different resets, and state the same instant.
// Policy.ResetAt keeps it, so a caller can tell them one window and take
// the earlier bound (the second came 0.9 s after the first: its window
// ends within 0.1 s, though its reset reads 1 s).
func ExamplePolicy_resetAt() {
	first := time.Date(2025, 5, 26, 5, 0, 4, 0, time.UTC) // its Date's second began
	for _, received := range []time.Time{first, first.Add(900 * time.Millisecond)} {
		h := http.Header{}
		h.Set("Date", received.Format(http.TimeFormat)) // whole seconds
		h.Set("X-RateLimit-Limit", "5000")
		h.Set("X-RateLimit-Remaining", "0")
		h.Set("X-RateLimit-Reset", "1748235605") // 05:00:05
		p := ratelimit.Parse(h, received).Policies[0]
		fmt.Printf("reset %v, at %s, by %s\n", p.Reset, p.ResetAt.UTC().Format("15:04:05"), received.Add(p.Reset).Format("15:04:05.0"))
	}
	// Output:
	// reset 1s, at 05:00:05, by 05:00:05.0
	// reset 1s, at 05:00:05, by 05:00:05.9
}
