package sdktest_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"time"

	"github.com/google/go-github/v75/github"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/sdktest"
)

// The OpenAI SDK with the Transport retrying and pacing, and the SDK's
// own retries off (option.WithMaxRetries(0)), so that a 429 is retried by
// one layer only. The fake allows 2 requests per 200 ms: the Transport
// reads x-ratelimit-remaining-requests: 0 and holds the third call until
// the reset, and a spent account's 429 (x-should-retry: false) comes back
// at once, reported as a give-up.
func Example_openai() {
	api := sdktest.NewOpenAI(sdktest.OpenAILimits{Requests: 2, Window: 200 * time.Millisecond})
	fake := httptest.NewServer(api) // the fake API on a local socket
	defer fake.Close()

	tr := &throttle.Transport{OnEvent: func(e throttle.Event) {
		if e.Kind == throttle.EventGiveUp {
			fmt.Println("give up:", e.Reason)
		}
	}}
	client := openai.NewClient(
		option.WithBaseURL(fake.URL+"/v1"),
		option.WithAPIKey("sk-..."),
		option.WithHTTPClient(&http.Client{Transport: tr}),
		option.WithMaxRetries(0), // the Transport retries
	)
	params := openai.ChatCompletionNewParams{
		Model:    openai.ChatModelGPT4oMini,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	}
	for i := range 3 {
		_, err := client.Chat.Completions.New(context.Background(), params)
		fmt.Println("call", i+1, "error:", err)
	}
	ok, rejected := api.Counts()
	fmt.Println("server:", ok, "ok,", rejected, "429")

	spent := httptest.NewServer(sdktest.NewOpenAI(sdktest.OpenAILimits{InsufficientQuota: true}))
	defer spent.Close()
	_, err := client.Chat.Completions.New(context.Background(), params, option.WithBaseURL(spent.URL+"/v1"))
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		fmt.Println("spent account:", apiErr.StatusCode, apiErr.Code)
	}
	// Output:
	// call 1 error: <nil>
	// call 2 error: <nil>
	// call 3 error: <nil>
	// server: 3 ok, 0 429
	// give up: server said x-should-retry: false
	// spent account: 429 insufficient_quota
}

// go-github with the Transport, and go-github's own rate-limit pre-check
// off (DisableRateLimitCheck): the pre-check would fail every call locally
// with *github.RateLimitError once a response said x-ratelimit-remaining:
// 0, until the reset. The Transport holds those calls until the reset
// instead, and pauses and retries secondary limits (403 with
// retry-after). The fake allows 2 requests per 1 s window.
func Example_github() {
	api := sdktest.NewGitHub(sdktest.GitHubLimits{Primary: 2, Window: time.Second})
	fake := httptest.NewServer(api) // the fake API on a local socket
	defer fake.Close()

	client := github.NewClient(&http.Client{Transport: &throttle.Transport{}})
	client.DisableRateLimitCheck = true // the Transport waits for the reset
	client.BaseURL, _ = url.Parse(fake.URL + "/")

	for i := range 3 {
		repo, _, err := client.Repositories.Get(context.Background(), "octo", fmt.Sprint("r", i))
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(repo.GetFullName())
	}
	ok, primary, _ := api.Counts()
	fmt.Println("server:", ok, "ok,", primary, "rejected")
	// Output:
	// octo/r0
	// octo/r1
	// octo/r2
	// server: 3 ok, 0 rejected
}
