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

// An LLM call's tokens are known only from its response: the wait spends
// an estimate, and Settle amends it. Less used gives units back; more
// used is a debt the next waits pay.
func ExampleSettler() {
	// 1,000 tokens an hour, all at once (an hour's refill is too slow to
	// show in the output).
	lim := &throttle.Limiter{Limit: rate.Every(time.Hour / 1000), Burst: 1000}
	key := lim.For("openai")
	ctx := context.Background()

	_ = key.WaitN(ctx, 800) // the estimate: prompt + max_tokens
	fmt.Printf("spent 800: %.0f tokens left\n", lim.State("openai").Tokens)
	_ = key.(throttle.Settler).Settle(ctx, 800, 300) // usage said 300
	fmt.Printf("settled as 300: %.0f tokens left\n", lim.State("openai").Tokens)

	_ = key.WaitN(ctx, 600)
	_ = key.(throttle.Settler).Settle(ctx, 600, 900) // used more than estimated
	st := lim.State("openai")
	fmt.Printf("settled 600 as 900: %.0f tokens left, the next in %v\n", st.Tokens, st.Next.Round(time.Minute))
	// Output:
	// spent 800: 200 tokens left
	// settled as 300: 700 tokens left
	// settled 600 as 900: 0 tokens left, the next in 12m0s
}

// An LLM client whose requests spend their estimate (max_tokens) when
// sent and are settled from the usage in the response's body.
func ExampleSettleResponse() {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, `{"usage":{"prompt_tokens":20,"completion_tokens":130,"total_tokens":150}}`)
	}))
	defer api.Close()

	lim := &throttle.Limiter{Limit: rate.Every(time.Hour / 10000), Burst: 10000} // tokens
	client := &http.Client{Transport: &throttle.Transport{
		Waiter: lim,
		Cost:   func(*http.Request) int { return 20 + 500 }, // prompt + max_tokens
	}}
	resp, err := client.Post(api.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"max_tokens":500}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	var body struct {
		Usage struct {
			TotalTokens int `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		fmt.Println(err)
		return
	}
	host := resp.Request.URL.Host
	fmt.Printf("sent: %.0f tokens left\n", lim.State(host).Tokens)
	if err := throttle.SettleResponse(resp, body.Usage.TotalTokens); err != nil {
		fmt.Println(err)
	}
	fmt.Printf("settled as %d: %.0f tokens left\n", body.Usage.TotalTokens, lim.State(host).Tokens)
	fmt.Println(throttle.SettleResponse(resp, body.Usage.TotalTokens))
	// Output:
	// sent: 9480 tokens left
	// settled as 150: 9850 tokens left
	// throttle: response settled already
}
