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
func ExampleQuota_Settle() {
	// 1,000 tokens an hour, all at once (an hour's refill is too slow to
	// show in the output).
	lim := &throttle.Limiter{Limits: []throttle.Limit{{Rate: rate.Every(time.Hour / 1000), Burst: 1000}}}
	key := lim.For("openai")
	ctx := context.Background()

	_ = key.WaitN(ctx, 800) // the estimate: prompt + max_tokens
	st, _ := key.State(ctx)
	fmt.Printf("spent 800: %.0f tokens left\n", st.Tokens)
	_ = key.Settle(ctx, throttle.Cost{N: 800}, throttle.Cost{N: 300}) // usage said 300
	st, _ = key.State(ctx)
	fmt.Printf("settled as 300: %.0f tokens left\n", st.Tokens)

	_ = key.WaitN(ctx, 600)
	_ = key.Settle(ctx, throttle.Cost{N: 600}, throttle.Cost{N: 900}) // used more than estimated
	st, _ = key.State(ctx)
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

	lim := &throttle.Limiter{Limits: []throttle.Limit{{Rate: rate.Every(time.Hour / 10000), Burst: 10000}}} // tokens
	client := &http.Client{Transport: &throttle.Transport{
		Waiter: lim,
		CostOf: func(*http.Request) throttle.Cost { return throttle.Cost{N: 20 + 500} }, // prompt + max_tokens
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
	key := lim.For(resp.Request.URL.Host)
	st, _ := key.State(context.Background())
	fmt.Printf("sent: %.0f tokens left\n", st.Tokens)
	if err := throttle.SettleResponse(resp, throttle.Cost{N: body.Usage.TotalTokens}); err != nil {
		fmt.Println(err)
	}
	st, _ = key.State(context.Background())
	fmt.Printf("settled as %d: %.0f tokens left\n", body.Usage.TotalTokens, st.Tokens)
	fmt.Println(throttle.SettleResponse(resp, throttle.Cost{N: body.Usage.TotalTokens}))
	// Output:
	// sent: 9480 tokens left
	// settled as 150: 9850 tokens left
	// throttle: response settled already
}
