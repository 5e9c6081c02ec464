package sdktest

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// The documented error bodies of OpenAI's 429s.
const (
	openaiRateLimitBody = `{"error":{"message":"Rate limit reached for gpt-4o-mini in organization org-fake on requests per min (RPM): Limit %d, Used %d, Requested 1. Please try again in %s.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`
	openaiQuotaBody     = `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`
	openaiCompletion    = `{"id":"chatcmpl-fake","object":"chat.completion","created":1700000000,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"ok","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":1,"total_tokens":11}}`
)

// OpenAILimits configures an [OpenAI] fake. The zero value enforces no
// limit but still sends the rate-limit headers.
type OpenAILimits struct {
	// Requests is the number of requests per Window. Zero means 10000 and
	// no rejection.
	Requests int
	// Window is the request limit's window; it starts at the first
	// request after the previous one ended. Zero means one minute.
	Window time.Duration
	// Tokens is the token limit sent in the headers (11 tokens per
	// request are counted against it, never enforced). Zero means 2000000.
	Tokens int

	// Spent: every request is answered with a 429 rate_limit_exceeded
	// and the time to the window's end, as when other clients of the key
	// keep spending each window first.
	Spent bool

	// InsufficientQuota: every request is answered with the permanent
	// 429 of a spent account (insufficient_quota, x-should-retry: false).
	InsufficientQuota bool
}

// OpenAI is a fake of the OpenAI API's rate limits. It answers
// POST /v1/chat/completions with a completion, on any host, and counts
// what it saw. It is an [http.Handler], and an [http.RoundTripper] that
// serves each request in-process (see [Fake]). It is safe for concurrent
// use.
type OpenAI struct {
	calls

	lim OpenAILimits

	mu       sync.Mutex // protects the fields below
	used     int
	tokens   int
	reset    time.Time // end of the window; zero before the first request
	ok       int
	rejected int
}

// NewOpenAI returns an OpenAI fake enforcing lim. Any URL ending in "/v1"
// is the SDK's base URL.
func NewOpenAI(lim OpenAILimits) *OpenAI {
	if lim.Requests <= 0 {
		lim.Requests = 10000
	}
	if lim.Window <= 0 {
		lim.Window = time.Minute
	}
	if lim.Tokens <= 0 {
		lim.Tokens = 2000000
	}
	return &OpenAI{lim: lim}
}

// RoundTrip serves req in-process.
func (o *OpenAI) RoundTrip(req *http.Request) (*http.Response, error) {
	return serveInProcess(o, req)
}

// Counts returns how many requests succeeded and how many were answered
// 429.
func (o *OpenAI) Counts() (ok, rejected int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.ok, o.rejected
}

// ServeHTTP answers r as the OpenAI API would, on the clock of time.Now.
func (o *OpenAI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o.calls.add(r)
	now := time.Now()
	o.mu.Lock()
	if o.reset.IsZero() || !now.Before(o.reset) {
		o.used, o.tokens = 0, 0
		o.reset = now.Add(o.lim.Window)
	}
	left := o.reset.Sub(now)
	status := http.StatusOK
	switch {
	case o.lim.InsufficientQuota:
		status = http.StatusTooManyRequests
		o.rejected++
	case o.lim.Spent, o.used >= o.lim.Requests:
		status = http.StatusTooManyRequests
		o.rejected++
	default:
		o.used++
		o.tokens += 11
		o.ok++
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Openai-Processing-Ms", "1")
	h.Set("X-Request-Id", "req_fake")
	h.Set("X-Ratelimit-Limit-Requests", strconv.Itoa(o.lim.Requests))
	h.Set("X-Ratelimit-Limit-Tokens", strconv.Itoa(o.lim.Tokens))
	h.Set("X-Ratelimit-Remaining-Requests", strconv.Itoa(o.lim.Requests-o.used))
	h.Set("X-Ratelimit-Remaining-Tokens", strconv.Itoa(o.lim.Tokens-o.tokens))
	h.Set("X-Ratelimit-Reset-Requests", duration(left))
	h.Set("X-Ratelimit-Reset-Tokens", duration(time.Duration(o.tokens)*time.Minute/time.Duration(o.lim.Tokens)))
	used := o.used
	o.mu.Unlock()

	switch {
	case status == http.StatusOK:
		w.WriteHeader(status)
		fmt.Fprint(w, openaiCompletion)
	case o.lim.InsufficientQuota:
		h.Set("X-Should-Retry", "false")
		w.WriteHeader(status)
		fmt.Fprint(w, openaiQuotaBody)
	default:
		ms := (left + time.Millisecond - 1) / time.Millisecond
		h.Set("Retry-After-Ms", strconv.FormatInt(int64(ms), 10))
		// Both, as the API sends them: whole seconds rounded up, and the
		// exact wait (the SDKs prefer the milliseconds).
		h.Set("Retry-After", strconv.Itoa(ceilSeconds(left)))
		h.Set("X-Should-Retry", "true")
		w.WriteHeader(status)
		fmt.Fprintf(w, openaiRateLimitBody, o.lim.Requests, used, duration(left))
	}
}

// duration formats d as the API's resets are: a Go duration at
// millisecond precision ("167ms", "1s", "6m0s").
func duration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	return d.Round(time.Millisecond).String()
}
