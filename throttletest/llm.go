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

// LLM is an LLM API that states its limits as OpenAI's and Anthropic's
// pages do: RPM requests AND TPM tokens per Window, as fixed windows
// aligned to the Unix epoch, and at most MaxInFlight requests at once. A
// request asks for its estimate, the max_completion_tokens (or
// max_tokens) of its JSON body; it is admitted if its window has a
// request left, the window's tokens and the estimate are at most TPM,
// and fewer than MaxInFlight requests are in flight. The window is
// charged the estimate at admission; when its completion is done, Gen
// later, the difference with the tokens used (Used) is counted in the
// window it is done in, never below zero there (a completion that used
// more spends from that window, past TPM if need be; one that used less
// gives the rest back to it). The response, a chat.completion, reports
// the tokens used in usage.total_tokens. A refusal is a 429 with
// retry-after-ms and retry-after (whole seconds, rounded up): the time
// to the next window, or, refused for the requests in flight, none.
//
// The zero value is not usable: every request is answered 500 with a
// message saying so. Create one with [NewLLM]; set the fields before the
// first request. It is an [http.Handler], safe for concurrent use; it
// records what it saw in its [Counter], the tokens used as the admitted
// units, and the most requests in flight at once ([LLM.Peak]).
type LLM struct {
	Counter

	RPM, TPM    int           // requests and tokens a window; set by NewLLM
	Window      time.Duration // set by NewLLM
	MaxInFlight int           // 0 means no cap
	// Used returns the tokens a completion of estimate tokens uses; it is
	// called under the server's lock. Nil means the estimate.
	Used func(estimate int) int
	// Gen is how long a completion takes. Zero means at once.
	Gen time.Duration
	// Now is the server's clock. Nil means time.Now (the fake clock
	// inside a testing/synctest bubble).
	Now func() time.Time

	mu             sync.Mutex // protects the fields below
	idx            int64      // the window of the counts
	reqs, toks     float64
	inFlight, peak int
}

// NewLLM returns an LLM server of rpm requests and tpm tokens per
// window. It panics if any is not positive.
func NewLLM(rpm, tpm int, window time.Duration) *LLM {
	mustPositive("NewLLM", "rpm", rpm)
	mustPositive("NewLLM", "tpm", tpm)
	mustPositive("NewLLM", "window", window)
	return &LLM{RPM: rpm, TPM: tpm, Window: window}
}

// Peak returns the most requests that were in flight at once.
func (s *LLM) Peak() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak
}

// roll brings the counts to t's window; s.mu is held.
func (s *LLM) roll(t time.Time) {
	if i := t.UnixNano() / int64(s.Window); i != s.idx {
		s.idx, s.reqs, s.toks = i, 0, 0
	}
}

// ServeHTTP admits r or refuses it, as the type's rule says.
func (s *LLM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if misconfigured(w, s.RPM <= 0 || s.TPM <= 0 || s.Window <= 0, "LLM needs a positive RPM, TPM and Window: make it with NewLLM") {
		return
	}
	var req completionRequest
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	json.Unmarshal(body, &req) // a body that is not JSON asks for no completion
	est := min(max(req.MaxCompletionTokens, req.MaxTokens, 0), maxAsk)

	s.mu.Lock()
	t := now(s.Now)
	s.roll(t)
	capped := s.MaxInFlight > 0 && s.inFlight >= s.MaxInFlight
	ok := !capped && s.reqs+1 <= float64(s.RPM) && s.toks+float64(est) <= float64(s.TPM)
	used := est
	if ok {
		s.reqs++
		s.toks += float64(est)
		s.inFlight++
		s.peak = max(s.peak, s.inFlight)
		if s.Used != nil {
			used = max(s.Used(est), 0)
		}
	}
	s.record(t, r.Header.Get(WorkerHeader), ok, int64(used))
	s.mu.Unlock()

	h := w.Header()
	h.Set("Content-Type", "application/json")
	if !ok {
		setDate(h, t, 0)
		if !capped {
			next := time.Unix(0, (t.UnixNano()/int64(s.Window)+1)*int64(s.Window))
			wait := next.Sub(t)
			h.Set("Retry-After-Ms", itoa(max(int64(math.Ceil(float64(wait)/float64(time.Millisecond))), 1)))
			h.Set("Retry-After", itoa(max(ceilSeconds(wait), 1)))
		}
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprintf(w, `{"error":{"message":"Rate limit reached: %d requests, %d tokens per %v, %d in flight","type":"requests","code":"rate_limit_exceeded"}}`+"\n",
			s.RPM, s.TPM, s.Window, s.MaxInFlight)
		return
	}
	if s.Gen > 0 {
		time.Sleep(s.Gen)
	}
	s.mu.Lock()
	t = now(s.Now)
	s.roll(t)
	s.toks = max(s.toks+float64(used-est), 0) // the usage, counted when the completion is done
	s.inFlight--
	s.mu.Unlock()
	setDate(h, t, 0)
	fmt.Fprintf(w, `{"id":"chatcmpl-throttletest","object":"chat.completion","created":%d,"model":"throttletest",`+
		`"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],`+
		`"usage":{"prompt_tokens":0,"completion_tokens":%d,"total_tokens":%d}}`+"\n", t.Unix(), used, used)
}
