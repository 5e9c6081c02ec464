package throttle_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/throttle-go/throttle"
)

// A GitHub client: 5,000 requests an hour from the first (the primary
// limit, a window the responses' X-RateLimit headers track), and two
// of GitHub's secondary limits, 100 requests at once and 900 points a
// minute for REST, where a GET costs 1 point and a request that changes
// something 5. A 403 that is a secondary limit (a Retry-After, or
// remaining 0 with a reset) pauses the key and is retried, as a 429 is.
func ExampleTransport_github() {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-RateLimit-Limit", "5000")
		w.Header().Set("X-RateLimit-Remaining", "4990")
		w.Header().Set("X-RateLimit-Reset", fmt.Sprint(time.Now().Add(time.Hour).Unix()))
		io.WriteString(w, "{}")
	}))
	defer api.Close()

	lim := &throttle.Limiter{
		Limits: []throttle.Limit{
			{Count: 5000, Per: time.Hour, Kind: throttle.FromFirstUse}, // primary
			{Unit: "points", Count: 900, Per: time.Minute, Kind: throttle.Sliding},
		},
		InFlight: 100, // secondary: 100 at once
	}
	client := &http.Client{Transport: &throttle.Transport{
		Waiter: lim,
		CostOf: func(r *http.Request) throttle.Cost {
			switch r.Method {
			case http.MethodGet, http.MethodHead, http.MethodOptions:
				return throttle.Cost{N: 1, Units: map[string]int{"points": 1}}
			}
			return throttle.Cost{N: 1, Units: map[string]int{"points": 5}}
		},
	}}

	for _, method := range []string{"GET", "GET", "POST"} {
		req, _ := http.NewRequest(method, api.URL+"/repos/o/r/issues", nil)
		resp, err := client.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		io.Copy(io.Discard, resp.Body) // read to the end: its slot goes back
		resp.Body.Close()
		fmt.Println(method, resp.StatusCode)
	}
	key := api.Listener.Addr().String() // the Transport's key: the request's host
	st, _ := lim.For(key).State(context.Background())
	for _, l := range st.Limits {
		unit := l.Unit
		if unit == "" {
			unit = "requests" // the first limit's unit: what CostOf's N counts
		}
		fmt.Printf("%s: %.0f left\n", unit, l.Remaining)
	}
	// Output:
	// GET 200
	// GET 200
	// POST 200
	// requests: 4997 left
	// points: 893 left
}
