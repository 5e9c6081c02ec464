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

// openaiURL is the base URL the tests give the SDK; the fake, as the
// client's transport, answers on any host.
const openaiURL = "https://api.openai.test/v1"

// openaiClient returns an SDK client over hc, whose transport ends in a
// fake, with opts.
func openaiClient(hc *http.Client, opts ...option.RequestOption) openai.Client {
	opts = append([]option.RequestOption{
		option.WithBaseURL(openaiURL),
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
		return openaiClient(&http.Client{Transport: f}), nil
	}},
	{"SDK retries + Transport retries", func(f *sdktest.OpenAI) (openai.Client, *recorder) {
		rec := &recorder{}
		return openaiClient(transportClient(&throttle.Transport{Base: f, OnEvent: rec.on})), rec
	}},
	{"SDK retries + Transport MaxAttempts 1", func(f *sdktest.OpenAI) (openai.Client, *recorder) {
		rec := &recorder{}
		tr := &throttle.Transport{Base: f, OnEvent: rec.on, Retry: throttle.RetryPolicy{MaxAttempts: 1}}
		return openaiClient(transportClient(tr)), rec
	}},
	{recommendedOpenAI, func(f *sdktest.OpenAI) (openai.Client, *recorder) {
		rec := &recorder{}
		return openaiClient(transportClient(&throttle.Transport{Base: f, OnEvent: rec.on}), option.WithMaxRetries(0)), rec
	}},
}

// recommendedOpenAI is the setup the README recommends: one layer
// retries, the one that also paces.
const recommendedOpenAI = "WithMaxRetries(0) + Transport retries"

// TestOpenAIRateLimited runs 20 concurrent chat completions against a
// limit of 5 requests per second through each setup, and reports
// successes, attempts per call and 429s. With the recommended setup every
// call succeeds.
func TestOpenAIRateLimited(t *testing.T) {
	for _, s := range openaiSetups {
		t.Run(s.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				fake := sdktest.NewOpenAI(sdktest.OpenAILimits{Requests: 5, Window: time.Second})
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
				if s.name == recommendedOpenAI && (res.ok != 20 || maxN > 5) {
					// 5 calls a window, every call still waiting retried at
					// each reset: the 20 are through by the 4th reset, within
					// MaxAttempts (5).
					t.Errorf("%d of 20 calls succeeded, at most %d attempts each; want 20, at most 5", res.ok, maxN)
				}
			})
		})
	}
}

// TestOpenAIAttemptsMultiply measures attempts per call against a limit
// that stays spent (429, retry-after-ms: the 50 ms to the window's end):
// the layers multiply when both retry. Each call's attempts are bounded
// by the one layer that retries when the other is turned off.
func TestOpenAIAttemptsMultiply(t *testing.T) {
	want := map[string]int{ // attempts per call when one layer retries
		"bare SDK (2 retries)":                  3,
		"SDK retries + Transport retries":       15, // 3 × 5: both layers
		"SDK retries + Transport MaxAttempts 1": 3,
		"WithMaxRetries(0) + Transport retries": 5,
	}
	for _, s := range openaiSetups {
		t.Run(s.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				fake := sdktest.NewOpenAI(sdktest.OpenAILimits{Spent: true, Window: 50 * time.Millisecond})
				c, rec := s.client(fake)
				res := runCalls(4, 4, 15*time.Second, chat(c), openaiKind)
				mean, maxN := attemptStats(fake.Attempts())
				t.Logf("%s: %v; attempts per call mean %.2f max %d", s.name, res, mean, maxN)
				if rec != nil {
					t.Logf("events: %v", rec.counts())
				}
				if res.ok != 0 {
					t.Errorf("%d calls succeeded against a spent limit", res.ok)
				}
				if a := fake.Attempts(); len(a) != 4 || a[0] != want[s.name] || a[3] != want[s.name] {
					t.Errorf("attempts per call %v; want %d each", a, want[s.name])
				}
			})
		})
	}
}

// TestOpenAIPermanent429 sends 10 calls, one after another, to an
// account whose quota is spent (429 insufficient_quota, x-should-retry:
// false): no layer may retry them or slow the next call down. Each must
// reach the caller after one attempt, at once (on the bubble's clock: no
// time at all, where either layer's shortest retry delay would show). A
// Transport reports an EventGiveUp with the reason for each.
func TestOpenAIPermanent429(t *testing.T) {
	for _, s := range openaiSetups {
		t.Run(s.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				fake := sdktest.NewOpenAI(sdktest.OpenAILimits{InsufficientQuota: true})
				c, rec := s.client(fake)
				res := runCalls(10, 1, 15*time.Second, chat(c), openaiKind)
				t.Logf("%s: %v; attempts %v", s.name, res, fake.Attempts())
				if res.errs["429 insufficient_quota"] != 10 {
					t.Errorf("errors %v; want 10 × 429 insufficient_quota", res.errs)
				}
				if a := fake.Attempts(); len(a) != 10 || a[9] != 1 {
					t.Errorf("attempts per call %v; want 1 each", a)
				}
				if slowest := res.times[len(res.times)-1]; slowest != 0 {
					t.Errorf("slowest call took %v; want 0 (no retry, no wait)", slowest)
				}
				if rec != nil {
					ev := rec.counts()
					t.Logf("events: %v", ev)
					if n := ev["give-up: server said x-should-retry: false"]; n != 10 {
						t.Errorf("%d give-ups for x-should-retry: false; want 10", n)
					}
				}
			})
		})
	}
}

// TestOpenAIRetryAfterMS checks that a 429 with retry-after: 1 and
// retry-after-ms below a second is retried after the milliseconds, as the
// SDK itself does. Against 1 request per 300 ms, another client spends
// the window (so the setup under test has not seen remaining 0), then
// one call through the setup gets a 429 with retry-after: 1 and
// retry-after-ms: 300 (on the bubble's clock the two calls come at one
// instant); it must be back after exactly those 300 ms (honouring the
// rounded retry-after would take 1 s).
func TestOpenAIRetryAfterMS(t *testing.T) {
	for _, s := range openaiSetups {
		t.Run(s.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				fake := sdktest.NewOpenAI(sdktest.OpenAILimits{Requests: 1, Window: 300 * time.Millisecond})
				other := openaiClient(&http.Client{Transport: fake}, option.WithMaxRetries(0))
				if err := chat(other)(t.Context(), -1); err != nil {
					t.Fatal(err)
				}
				c, _ := s.client(fake)
				res := runCalls(1, 1, 15*time.Second, chat(c), openaiKind)
				ok, rejected := fake.Counts()
				t.Logf("%s: %v; server %d ok, %d 429", s.name, res, ok, rejected)
				if res.ok != 1 || rejected != 1 {
					t.Errorf("%d of 1 call succeeded, %d 429s; want 1 and 1", res.ok, rejected)
				}
				if d := res.times[0]; d != 300*time.Millisecond {
					t.Errorf("the rate-limited call took %v; want 300ms (retry-after-ms)", d)
				}
			})
		})
	}
}

// TestOpenAIDeadline runs 30 concurrent calls with 1.5 s each against 5
// requests per second: most cannot be served in time. With the
// recommended setup a call that cannot get through before its deadline
// fails with throttle.ErrWouldExceedDeadline (no turn came in time;
// nothing sent) or returns the last 429 (the retry could not start in
// time): never a request sent and then cut by the deadline, which would
// have spent quota for nothing.
func TestOpenAIDeadline(t *testing.T) {
	for _, s := range openaiSetups {
		t.Run(s.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				fake := sdktest.NewOpenAI(sdktest.OpenAILimits{Requests: 5, Window: time.Second})
				c, rec := s.client(fake)
				res := runCalls(30, 30, 1500*time.Millisecond, chat(c), openaiKind)
				ok, rejected := fake.Counts()
				t.Logf("%s: %v; server: %d ok, %d 429", s.name, res, ok, rejected)
				if rec != nil {
					t.Logf("events: %v", rec.counts())
				}
				if s.name != recommendedOpenAI {
					return
				}
				for kind, n := range res.errs {
					if kind != "ErrWouldExceedDeadline" && kind != "429 rate_limit_exceeded" {
						t.Errorf("%d calls failed with %s; want only ErrWouldExceedDeadline or the last 429", n, kind)
					}
				}
			})
		})
	}
}
