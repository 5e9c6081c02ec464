package throttle_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/throttle-go/throttle"
)

// An LLM client paced by the API's three limits at once: requests and
// tokens (here per hour, so that the refill does not show in the output;
// an API's per-minute limits are written the same way) and requests in
// flight. Each request waits for one request and its estimate in tokens
// (prompt + max_tokens) on every limit; its usage settles the tokens.
func ExampleSettleResponse_limits() {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, `{"usage":{"prompt_tokens":20,"completion_tokens":130,"total_tokens":150}}`)
	}))
	defer api.Close()

	lim := &throttle.Limiter{InFlight: 8, Limits: []throttle.Limit{
		{Rate: rate.Every(time.Hour / 500), Burst: 500},                     // requests
		{Unit: "tokens", Rate: rate.Every(time.Hour / 30000), Burst: 30000}, // tokens
	}}
	client := &http.Client{Transport: &throttle.Transport{Waiter: lim, CostOf: func(*http.Request) throttle.Cost {
		return throttle.Cost{N: 1, Units: map[string]int{"tokens": 20 + 500}} // prompt + max_tokens
	}}}
	show := func(what string, host string) {
		st, _ := lim.For(host).State(context.Background())
		fmt.Printf("%s: %.0f requests", what, st.Tokens)
		for _, l := range st.Limits {
			fmt.Printf(" %.0f %s", l.Remaining, l.Unit)
		}
		fmt.Println(" left")
	}

	resp, err := client.Post(api.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"max_tokens":500}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	var body struct {
		Usage struct {
			TotalTokens int `json:"total_tokens"`
		} `json:"usage"`
	}
	err = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close() // the request is no longer in flight
	if err != nil {
		fmt.Println(err)
		return
	}
	host := resp.Request.URL.Host
	show("sent", host)
	used := throttle.Cost{N: 1, Units: map[string]int{"tokens": body.Usage.TotalTokens}}
	if err := throttle.SettleResponse(resp, used); err != nil {
		fmt.Println(err)
	}
	show(fmt.Sprintf("settled as %d tokens", body.Usage.TotalTokens), host)
	fmt.Println(throttle.SettleResponse(resp, used))
	// Output:
	// sent: 499 requests 29480 tokens left
	// settled as 150 tokens: 499 requests 29850 tokens left
	// throttle: response settled already
}
