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
// It takes about 8 s, with 3 to 5 refusals (the cycles that learn it, a
// probe) where a key that does not learn takes one every 10 requests;
// TestTransportHiddenBudget counts them on a fake clock, where a loaded
// machine's late wake-ups cannot move the count.
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
	u, _ := url.Parse(ts.URL)
	state, _ := limiter.For(u.Host).State(context.Background())
	fmt.Println("the key keeps a window:", state.Window != nil)
	// Output:
	// admitted: 80
	// the key keeps a window: true
}
