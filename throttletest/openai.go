package throttletest

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"sync"
	"time"
)

// OpenAI limits requests and tokens per minute as OpenAI's API does: two
// token buckets, of RPM requests and TPM tokens, each refilling
// continuously (RPM/60 a second) up to full. A request is admitted when
// both hold what it costs: one request, and the tokens it asks for,
// PromptTokens plus the max_completion_tokens (or max_tokens) of its JSON
// body. Every response carries
//
//	x-ratelimit-limit-requests: 60
//	x-ratelimit-limit-tokens: 6000
//	x-ratelimit-remaining-requests: 59
//	x-ratelimit-remaining-tokens: 5798
//	x-ratelimit-reset-requests: 1s
//	x-ratelimit-reset-tokens: 2.02s
//
// where a reset is the time until that bucket is full again, not the end
// of a window: the next unit frees long before. A refusal is a 429 with
// retry-after-ms and retry-after (whole seconds, rounded up), the time
// until both buckets hold the request's cost; a request costing more than
// TPM can never be served, and its 429 carries neither. An admitted
// request is answered with a chat.completion whose usage reports
// PromptTokens and the completion tokens Used of its maximum.
//
// The zero value is not usable: every request is answered 500 with a
// message saying so. Create one with [NewOpenAI]; set the fields before the first request.
// It is an [http.Handler], safe for concurrent use; it records what it saw
// in its [Counter], tokens as the admitted units.
type OpenAI struct {
	Counter

	RPM int // requests per minute; set by NewOpenAI
	TPM int // tokens per minute; set by NewOpenAI
	// PromptTokens is what each request's prompt counts. Zero means 0.
	PromptTokens int
	// Used is the fraction of its maximum completion tokens a request's
	// usage reports (the bucket is charged the maximum, as OpenAI's
	// estimate is). Zero means 1.
	Used float64
	// Now is the server's clock. Nil means time.Now (the fake clock
	// inside a testing/synctest bubble).
	Now func() time.Time

	mu      sync.Mutex // protects the fields below; serialises decisions
	started bool
	at      time.Time // when reqs and toks were last brought up to date
	reqs    float64   // requests in the bucket
	toks    float64   // tokens in the bucket
}

// NewOpenAI returns an OpenAI server allowing rpm requests and tpm tokens
// per minute. It panics if either is not positive.
func NewOpenAI(rpm, tpm int) *OpenAI {
	mustPositive("NewOpenAI", "rpm", rpm)
	mustPositive("NewOpenAI", "tpm", tpm)
	return &OpenAI{RPM: rpm, TPM: tpm}
}

// maxAsk bounds the tokens one request can ask for, far past any TPM.
const maxAsk = 1 << 40

// completionRequest is the part of a chat-completion request the server reads.
type completionRequest struct {
	MaxTokens           int `json:"max_tokens"`
	MaxCompletionTokens int `json:"max_completion_tokens"`
}

// ServeHTTP admits r or refuses it, as the type's rule says.
func (s *OpenAI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if misconfigured(w, s.RPM <= 0 || s.TPM <= 0, "OpenAI needs a positive RPM and TPM: make it with NewOpenAI") {
		return
	}
	var req completionRequest
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	json.Unmarshal(body, &req) // a body that is not JSON asks for no completion
	// Bounded so that no body can make the cost overflow (or go negative
	// and refill the bucket).
	completion := min(max(req.MaxCompletionTokens, req.MaxTokens, 0), maxAsk)
	cost := float64(min(max(s.PromptTokens, 0), maxAsk) + completion)

	s.mu.Lock()
	t := now(s.Now)
	s.refill(t)
	ok := s.reqs >= 1 && s.toks >= cost
	var wait time.Duration
	if ok {
		s.reqs--
		s.toks -= cost
	} else {
		wait = max(s.until(s.reqs, 1, s.RPM), s.until(s.toks, cost, s.TPM))
	}
	reqs, toks := s.reqs, s.toks
	s.record(t, r.Header.Get(WorkerHeader), ok, int64(cost))
	s.mu.Unlock()

	h := w.Header()
	setDate(h, t, 0)
	h.Set("X-Ratelimit-Limit-Requests", itoa(int64(s.RPM)))
	h.Set("X-Ratelimit-Limit-Tokens", itoa(int64(s.TPM)))
	h.Set("X-Ratelimit-Remaining-Requests", itoa(int64(reqs)))
	h.Set("X-Ratelimit-Remaining-Tokens", itoa(int64(toks)))
	h.Set("X-Ratelimit-Reset-Requests", resetString(s.until(reqs, float64(s.RPM), s.RPM)))
	h.Set("X-Ratelimit-Reset-Tokens", resetString(s.until(toks, float64(s.TPM), s.TPM)))
	h.Set("Content-Type", "application/json")
	if !ok {
		if cost <= float64(s.TPM) {
			ms := max(int64(math.Ceil(float64(wait)/float64(time.Millisecond))), 1)
			h.Set("Retry-After-Ms", itoa(ms))
			h.Set("Retry-After", itoa(max(ceilSeconds(wait), 1)))
		}
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprintf(w, `{"error":{"message":"Rate limit reached: requests %d/min, tokens %d/min","type":"requests","code":"rate_limit_exceeded"}}`+"\n", s.RPM, s.TPM)
		return
	}
	used := s.Used
	if used <= 0 {
		used = 1
	}
	out := int(math.Round(float64(completion) * used))
	fmt.Fprintf(w, `{"id":"chatcmpl-throttletest","object":"chat.completion","created":%d,"model":"throttletest",`+
		`"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],`+
		`"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`+"\n",
		t.Unix(), s.PromptTokens, out, s.PromptTokens+out)
}

// refill brings both buckets up to t; s.mu is held. A new server's buckets
// are full.
func (s *OpenAI) refill(t time.Time) {
	if !s.started {
		s.started, s.at, s.reqs, s.toks = true, t, float64(s.RPM), float64(s.TPM)
		return
	}
	if d := t.Sub(s.at); d > 0 {
		m := d.Minutes()
		s.reqs = min(s.reqs+m*float64(s.RPM), float64(s.RPM))
		s.toks = min(s.toks+m*float64(s.TPM), float64(s.TPM))
		s.at = t
	}
}

// until is the time a bucket holding have, refilling perMinute, takes to
// hold want.
func (s *OpenAI) until(have, want float64, perMinute int) time.Duration {
	if have >= want {
		return 0
	}
	return time.Duration(math.Ceil((want - have) / float64(perMinute) * float64(time.Minute)))
}

// resetString writes a duration as OpenAI does: "167ms" under a second,
// else Go's form rounded to the millisecond ("6s", "2.02s", "6m0s").
func resetString(d time.Duration) string {
	d = d.Round(time.Millisecond)
	if d < time.Second {
		return fmt.Sprintf("%dms", d/time.Millisecond)
	}
	return d.String()
}
