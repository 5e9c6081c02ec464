package throttle_test

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/throttletest"
)

// The measurement: an LLM API of requests AND tokens per window
// and a cap in flight (throttletest.LLM), tokens used 50% to 150% of the
// estimate, 32 goroutines through one Transport configured with the same
// limits, settling each response's tokens from its usage. Time scaled
// down: windows of 2 s, a run of 20 s (10 windows), in a synctest bubble
// (deterministic: the figures are exact, run after run).
const (
	llmRPM, llmTPM = 150, 50000 // per llmWindow: the tokens bind (about 100 requests of 500)
	llmWindow      = 2 * time.Second
	llmInFlight    = 8
	llmGen         = 50 * time.Millisecond // a completion
	llmLatency     = 5 * time.Millisecond  // each way
)

// llmLimits are the limits of the throttletest.LLM server: requests a
// minute (the first limit) and tokens a minute.
func llmLimits() []throttle.Limit {
	return []throttle.Limit{
		{Count: llmRPM, Per: llmWindow},
		{Unit: "tokens", Count: llmTPM, Per: llmWindow},
	}
}

// llmCost returns a request's cost: a request and its max_tokens
// (the estimate) times reserve: 1 waits for the estimate, 1.5 for the
// most a request may use (the estimate's +50%).
func llmCost(reserve float64) func(r *http.Request) throttle.Cost {
	return func(r *http.Request) throttle.Cost {
		n, _ := strconv.Atoi(r.Header.Get("X-Max-Tokens"))
		return throttle.Cost{N: 1, Units: map[string]int{"tokens": int(math.Ceil(reserve * float64(n)))}}
	}
}

// llmDo sends one completion of est tokens and settles its usage; it
// returns an error for anything but a 200 settled.
func llmDo(client *http.Client, est int) error {
	req, _ := http.NewRequest("POST", "http://llm.example/v1/chat/completions",
		strings.NewReader(fmt.Sprintf(`{"max_tokens":%d}`, est)))
	req.Header.Set("X-Max-Tokens", strconv.Itoa(est))
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	var out struct {
		Usage struct {
			TotalTokens int `json:"total_tokens"`
		} `json:"usage"`
	}
	err = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || err != nil {
		return fmt.Errorf("status %d, %v", resp.StatusCode, err)
	}
	return throttle.SettleResponse(resp, throttle.Cost{N: 1, Units: map[string]int{"tokens": out.Usage.TotalTokens}})
}

// newLLMServer returns the fake API, its usage drawn from seed, and the
// tokens used by the requests admitted from origin to end (read after the
// run).
func newLLMServer(seed uint64, origin, end func() time.Time) (*throttletest.LLM, *int64) {
	srv := throttletest.NewLLM(llmRPM, llmTPM, llmWindow)
	srv.MaxInFlight, srv.Gen = llmInFlight, llmGen
	rng := rand.New(rand.NewPCG(seed, 7))
	var inRun int64
	srv.Used = func(est int) int { // under the server's lock, at admission
		n := int(math.Round(float64(est) * (0.5 + rng.Float64())))
		if now := time.Now(); !now.Before(origin()) && now.Before(end()) {
			inRun += int64(n)
		}
		return n
	}
	return srv, &inRun
}

// llmLoad runs goroutines sending completions (estimates 200 to 800
// tokens) through client until run has passed since start.
func llmLoad(t *testing.T, client *http.Client, goroutines int, seed uint64, start time.Time, run time.Duration) {
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(g)))
			for time.Since(start) < run {
				if err := llmDo(client, 200+rng.IntN(601)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// llmFigures returns the fake's 429s and goodput against the binding
// limit (the tokens used by the requests admitted in the run's windows
// over TPM per window), and checks the goals: at most max429 429s,
// goodput ≥ 0.95, never more in flight than the cap.
func llmFigures(t *testing.T, srv *throttletest.LLM, used int64, run time.Duration, max429 int) (int, float64) {
	t.Helper()
	st := srv.Stats()
	windows := float64(run / llmWindow)
	goodput := float64(used) / (llmTPM * windows)
	t.Logf("%d requests admitted, %d 429s; tokens used in the run's windows %d of %d: goodput %.3f; peak in flight %d of %d",
		st.Admitted, st.Rejected, used, int(llmTPM*windows), goodput, srv.Peak(), llmInFlight)
	if st.Rejected > max429 || goodput < 0.95 || srv.Peak() > llmInFlight {
		t.Errorf("%d 429s, goodput %.3f, peak in flight %d; want ≤ %d, ≥ 0.95, ≤ %d", st.Rejected, goodput, srv.Peak(), max429, llmInFlight)
	}
	return st.Rejected, goodput
}

// TestLLMLimits: the measurement in process (see above), in two
// ways of waiting. For the estimate, a completion that used more than it
// is charged by the server when it is done, before the client can know
// (its response is on its way, then settled): a request the client sent
// meanwhile into a window it filled to the brim is refused. For the most
// a request may use (1.5× the estimate), the client's count is never
// below the server's: no 429 can come, and what was not used is given
// back when settled.
func TestLLMLimits(t *testing.T) {
	const run = 20 * time.Second
	for _, tt := range []struct {
		name    string
		reserve float64
		max429  int
	}{
		{"estimate", 1, 10}, // 1% of the requests
		{"bound", 1.5, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// The bubble starts on a window's boundary (2000-01-01 UTC).
				start := time.Now()
				srv, used := newLLMServer(1, func() time.Time { return start }, func() time.Time { return start.Add(run) })
				client := &http.Client{Transport: &throttle.Transport{
					Base:   &throttletest.Direct{Handler: srv, Latency: llmLatency},
					Waiter: &throttle.Limiter{Limits: llmLimits(), InFlight: llmInFlight},
					CostOf: llmCost(tt.reserve),
				}}
				llmLoad(t, client, 32, 1, start, run)
				llmFigures(t, srv, *used, run, tt.max429)
			})
		})
	}
}
