package throttle_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"time"

	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/throttletest"
)

// A server that allows 10 requests in any second, below the 100 a second
// the client was told, and says so only with a 429 and Retry-After: the
// key learns the budget from three refusals (q units per window, kept in
// its state) and sends at once what the budget allows, then waits for the
// window's end, instead of taking a refusal every 10 requests. A
// [distributed.Limiter]'s key learns it the same way, for the whole fleet.
// It takes about 8 s; without learning the budget, the key takes a refusal
// a cycle, every 10 requests (8 of the 80).
func ExampleLimiter_hiddenBudget() {
	srv := throttletest.NewSlidingLog(10, time.Second)
	ts := httptest.NewServer(srv)
	defer ts.Close()
	limiter := &throttle.Limiter{Limits: []throttle.Limit{{Rate: 100, Burst: 10}}}
	client := &http.Client{Transport: &throttle.Transport{Waiter: limiter, Base: ts.Client().Transport}}

	for range 80 {
		resp, err := client.Get(ts.URL)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
	}
	st := srv.Stats()
	fmt.Println("admitted:", st.Admitted)
	fmt.Println("refused fewer than 7 (3 to learn it, a probe):", st.Rejected < 7)
	u, _ := url.Parse(ts.URL)
	state, _ := limiter.For(u.Host).State(context.Background())
	fmt.Println("the key keeps a window:", state.Window != nil)
	// Output:
	// admitted: 80
	// refused fewer than 7 (3 to learn it, a probe): true
	// the key keeps a window: true
}
