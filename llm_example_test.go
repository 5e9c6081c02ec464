package throttle_test

import (
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
func ExampleSettleResponseUnits() {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, `{"usage":{"prompt_tokens":20,"completion_tokens":130,"total_tokens":150}}`)
	}))
	defer api.Close()

	lim := &throttle.Limiter{
		Limits: []throttle.UnitLimit{
			{Unit: "requests", Rate: throttle.Rate{Limit: rate.Every(time.Hour / 500), Burst: 500}},
			{Unit: "tokens", Rate: throttle.Rate{Limit: rate.Every(time.Hour / 30000), Burst: 30000}},
		},
		InFlight: 8, // requests at once
	}
	client := &http.Client{Transport: &throttle.Transport{
		Waiter: lim,
		Units: func(*http.Request) []throttle.UnitCost {
			return []throttle.UnitCost{{Unit: "requests", N: 1}, {Unit: "tokens", N: 20 + 500}} // prompt + max_tokens
		},
	}}
	show := func(what string, host string) {
		fmt.Print(what, ":")
		for _, l := range lim.LimitStates(host) {
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
	used := []throttle.UnitCost{{Unit: "tokens", N: body.Usage.TotalTokens}}
	if err := throttle.SettleResponseUnits(resp, used); err != nil {
		fmt.Println(err)
	}
	show(fmt.Sprintf("settled as %d tokens", body.Usage.TotalTokens), host)
	fmt.Println(throttle.SettleResponseUnits(resp, used))
	// Output:
	// sent: 499 requests 29480 tokens left
	// settled as 150 tokens: 499 requests 29850 tokens left
	// throttle: response settled already
}
