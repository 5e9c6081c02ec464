package sdktest_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/sdktest"
)

// openaiClient returns an SDK client of fake over hc, with opts.
func openaiClient(fake *sdktest.OpenAI, hc *http.Client, opts ...option.RequestOption) openai.Client {
	opts = append([]option.RequestOption{
		option.WithBaseURL(fake.URL + "/v1"),
		option.WithAPIKey("sk-fake"),
		option.WithHTTPClient(hc),
	}, opts...)
	return openai.NewClient(opts...)
}

// chat makes call i: one chat completion, named by sdktest.CallHeader.
func chat(c openai.Client) func(ctx context.Context, i int) error {
	return func(ctx context.Context, i int) error {
		_, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:    openai.ChatModelGPT4oMini,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		}, option.WithHeader(sdktest.CallHeader, strconv.Itoa(i)))
		return err
	}
}

// openaiKind names an error the OpenAI SDK returned.
func openaiKind(err error) string {
	var apiErr *openai.Error
	switch {
	case errors.Is(err, throttle.ErrWouldExceedDeadline):
		return "ErrWouldExceedDeadline"
	case errors.Is(err, context.DeadlineExceeded):
		return "DeadlineExceeded"
	case errors.As(err, &apiErr):
		return strconv.Itoa(apiErr.StatusCode) + " " + apiErr.Code
	}
	return err.Error()
}

// openaiSetup is one way of stacking the SDK's retries and the Transport's.
type openaiSetup struct {
	name string
	// client returns the SDK client of fake, and the recorder of its
	// Transport's events (nil without a Transport).
	client func(fake *sdktest.OpenAI) (openai.Client, *recorder)
}

var openaiSetups = []openaiSetup{
	{"bare SDK (2 retries)", func(f *sdktest.OpenAI) (openai.Client, *recorder) {
		return openaiClient(f, &http.Client{}), nil
	}},
	{"SDK retries + Transport retries", func(f *sdktest.OpenAI) (openai.Client, *recorder) {
		rec := &recorder{}
		return openaiClient(f, transportClient(&throttle.Transport{OnEvent: rec.on})), rec
	}},
	{"SDK retries + Transport MaxAttempts 1", func(f *sdktest.OpenAI) (openai.Client, *recorder) {
		rec := &recorder{}
		tr := &throttle.Transport{OnEvent: rec.on, Retry: throttle.RetryPolicy{MaxAttempts: 1}}
		return openaiClient(f, transportClient(tr)), rec
	}},
	{"WithMaxRetries(0) + Transport retries", func(f *sdktest.OpenAI) (openai.Client, *recorder) {
		rec := &recorder{}
		return openaiClient(f, transportClient(&throttle.Transport{OnEvent: rec.on}), option.WithMaxRetries(0)), rec
	}},
}

// TestOpenAIRateLimited runs 20 concurrent chat completions against a
// limit of 5 requests per second through each setup, and reports
// successes, attempts per call and 429s. The Transport must not multiply
// the SDK's attempts: with the Transport retrying, no call makes more
// attempts than the Transport's MaxAttempts (5).
func TestOpenAIRateLimited(t *testing.T) {
	for _, s := range openaiSetups {
		t.Run(s.name, func(t *testing.T) {
			fake := sdktest.NewOpenAI(sdktest.OpenAILimits{Requests: 5, Window: time.Second})
			defer fake.Close()
			c, rec := s.client(fake)
			res := runCalls(20, 20, 15*time.Second, chat(c), openaiKind)
			ok, rejected := fake.Counts()
			mean, maxN := attemptStats(fake.Attempts())
			t.Logf("%s: %v; attempts per call mean %.2f max %d; server: %d ok, %d 429", s.name, res, mean, maxN, ok, rejected)
			if rec != nil {
				t.Logf("events: %v", rec.counts())
			}
			if ok != res.ok {
				t.Errorf("the server counted %d successes, the callers %d", ok, res.ok)
			}
			if rec != nil && maxN > 5 {
				t.Errorf("a call made %d attempts; the Transport's MaxAttempts is 5: the layers multiply", maxN)
			}
		})
	}
}
