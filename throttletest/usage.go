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

// Usage is an LLM API that counts the tokens requests really use, the
// server that a client settling its costs (throttle.SettleResponse) paces
// exactly: one token bucket of TPM tokens a minute, refilling
// continuously up to Burst. A request is admitted when the bucket holds
// its estimate, the max_completion_tokens (or max_tokens) of its JSON
// body, which the bucket is charged at once; when its completion is done,
// Gen later, the bucket is charged the tokens used instead (the estimate
// given back, the usage taken: the bucket may go below zero, a debt), and
// the response, a chat.completion, reports them in usage.total_tokens. A
// refusal is a 429 with retry-after-ms and retry-after (whole seconds,
// rounded up), the time until the bucket holds the estimate; an estimate
// above Burst can never be served, and its 429 carries neither.
//
// [OpenAI] is the other accounting: it charges the estimate and keeps it.
//
// The zero value is not usable: every request is answered 500 with a
// message saying so. Create one with [NewUsage]; set the fields before
// the first request. It is an [http.Handler], safe for concurrent use; it
// records what it saw in its [Counter], the tokens used as the admitted
// units.
type Usage struct {
	Counter

	TPM   int // tokens a minute; set by NewUsage
	Burst int // the most the bucket holds; set by NewUsage
	// Used returns the tokens a completion of estimate tokens uses; it is
	// called under the server's lock, one request at a time. Nil means
	// the estimate.
	Used func(estimate int) int
	// Gen is how long a completion takes before its usage is counted and
	// its response sent. Zero means at once.
	Gen time.Duration
	// Now is the server's clock. Nil means time.Now (the fake clock
	// inside a testing/synctest bubble).
	Now func() time.Time

	mu      sync.Mutex // protects the fields below; serialises decisions
	started bool
	at      time.Time // when toks was last brought up to date
	toks    float64
}

// NewUsage returns a Usage server of tpm tokens a minute, burst at once.
// It panics if either is not positive.
func NewUsage(tpm, burst int) *Usage {
	mustPositive("NewUsage", "tpm", tpm)
	mustPositive("NewUsage", "burst", burst)
	return &Usage{TPM: tpm, Burst: burst}
}

// ServeHTTP admits r or refuses it, as the type's rule says.
func (s *Usage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if misconfigured(w, s.TPM <= 0 || s.Burst <= 0, "Usage needs a positive TPM and Burst: make it with NewUsage") {
		return
	}
	var req completionRequest
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	json.Unmarshal(body, &req) // a body that is not JSON asks for no completion
	est := min(max(req.MaxCompletionTokens, req.MaxTokens, 0), maxAsk)

	s.mu.Lock()
	t := now(s.Now)
	s.refill(t)
	ok := s.toks >= float64(est)
	used := 0
	var wait time.Duration
	if ok {
		s.toks -= float64(est)
		used = est
		if s.Used != nil {
			used = max(s.Used(est), 0)
		}
	} else {
		wait = time.Duration(math.Ceil((float64(est) - s.toks) / float64(s.TPM) * float64(time.Minute)))
	}
	s.record(t, r.Header.Get(WorkerHeader), ok, int64(used))
	s.mu.Unlock()

	h := w.Header()
	h.Set("Content-Type", "application/json")
	if !ok {
		setDate(h, t, 0)
		if est <= s.Burst {
			ms := max(int64(math.Ceil(float64(wait)/float64(time.Millisecond))), 1)
			h.Set("Retry-After-Ms", itoa(ms))
			h.Set("Retry-After", itoa(max(ceilSeconds(wait), 1)))
		}
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprintf(w, `{"error":{"message":"Rate limit reached: tokens %d/min","type":"tokens","code":"rate_limit_exceeded"}}`+"\n", s.TPM)
		return
	}
	if s.Gen > 0 {
		time.Sleep(s.Gen)
	}
	s.mu.Lock()
	t = now(s.Now)
	s.refill(t)
	s.toks = min(s.toks+float64(est-used), float64(s.Burst)) // the usage, counted when the completion is done
	s.mu.Unlock()
	setDate(h, t, 0)
	fmt.Fprintf(w, `{"id":"chatcmpl-throttletest","object":"chat.completion","created":%d,"model":"throttletest",`+
		`"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],`+
		`"usage":{"prompt_tokens":0,"completion_tokens":%d,"total_tokens":%d}}`+"\n", t.Unix(), used, used)
}

// refill brings the bucket up to t; s.mu is held. A new server's bucket
// is full.
func (s *Usage) refill(t time.Time) {
	if !s.started {
		s.started, s.at, s.toks = true, t, float64(s.Burst)
		return
	}
	if d := t.Sub(s.at); d > 0 {
		s.toks = min(s.toks+d.Minutes()*float64(s.TPM), float64(s.Burst))
		s.at = t
	}
}
