package throttle_test

import (
	"encoding/json"
	"fmt"
	"io"
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

// usageLLM is a fake LLM API that counts the tokens really used: a
// tokens-per-minute bucket (Rate tokens a second, Cap at most) admits a
// request when it holds the request's estimate (its max_tokens), takes
// the estimate, and when the completion is done (Gen later) gives back
// or charges the difference to the tokens used, which differ from the
// estimate by up to ±50% and are reported in the response's usage. A
// refusal is a 429 with retry-after-ms. (throttletest.OpenAI charges the
// estimate and keeps it, as OpenAI documents: settling to the usage would
// be wrong against it.)
type usageLLM struct {
	Rate, Cap float64
	Gen       time.Duration
	// Used: the tokens used are the estimate times a fraction uniform in
	// [Used[0], Used[1]).
	Used [2]float64

	mu       sync.Mutex
	rng      *rand.Rand
	started  bool
	at       time.Time
	toks     float64
	used     float64 // tokens used by admitted requests
	rejected int
	admitted int
}

func (s *usageLLM) refill(now time.Time) {
	if !s.started {
		s.started, s.at, s.toks = true, now, s.Cap
		return
	}
	s.toks = min(s.toks+now.Sub(s.at).Seconds()*s.Rate, s.Cap)
	s.at = now
}

func (s *usageLLM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		MaxTokens int `json:"max_tokens"`
	}
	body, _ := io.ReadAll(r.Body)
	json.Unmarshal(body, &req)
	est := float64(req.MaxTokens)
	s.mu.Lock()
	s.refill(time.Now())
	if s.toks < est {
		wait := time.Duration(math.Ceil((est - s.toks) / s.Rate * 1e3))
		s.rejected++
		s.mu.Unlock()
		w.Header().Set("Retry-After-Ms", strconv.FormatInt(int64(max(wait, 1)), 10))
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	s.toks -= est
	used := math.Round(est * (s.Used[0] + (s.Used[1]-s.Used[0])*s.rng.Float64()))
	s.admitted++
	s.used += used
	s.mu.Unlock()
	time.Sleep(s.Gen)
	s.mu.Lock()
	s.refill(time.Now())
	s.toks += est - used // the usage, counted when the completion is done
	s.mu.Unlock()
	fmt.Fprintf(w, `{"usage":{"total_tokens":%d}}`, int(used))
}

// llmRun sends requests from goroutines through one Transport for run
// against a usageLLM, settling each from its usage if settle, and
// returns the 429s the server sent and its goodput: the tokens used by
// the requests it admitted over the most its bucket allows in run.
func llmRun(t *testing.T, goroutines int, settle bool, used [2]float64, run time.Duration) (rejected int, goodput float64) {
	const rate, capacity = 1000.0, 5000.0 // tokens: 60,000 a minute, 5,000 at once
	srv := &usageLLM{Rate: rate, Cap: capacity, Gen: 500 * time.Millisecond, Used: used, rng: rand.New(rand.NewPCG(1, 2))}
	var estimates sync.Map // *http.Request → its estimate
	client := &http.Client{Transport: &throttle.Transport{
		Base:   &throttletest.Direct{Handler: srv, Latency: 100 * time.Millisecond},
		Waiter: &throttle.Limiter{Limit: rate, Burst: capacity},
		Cost: func(r *http.Request) int {
			n, _ := estimates.Load(r.Header.Get("X-Id"))
			return n.(int)
		},
	}}
	start := time.Now()
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 3))
			for i := 0; time.Since(start) < run; i++ {
				est := 200 + rng.IntN(601)
				id := fmt.Sprint(g, "-", i)
				estimates.Store(id, est)
				req, _ := http.NewRequest("POST", "http://llm.example/v1/chat/completions",
					strings.NewReader(fmt.Sprintf(`{"max_tokens":%d}`, est)))
				req.Header.Set("X-Id", id)
				resp, err := client.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				var out struct {
					Usage struct {
						TotalTokens int `json:"total_tokens"`
					} `json:"usage"`
				}
				err = json.NewDecoder(resp.Body).Decode(&out)
				resp.Body.Close()
				if settle && err == nil && resp.StatusCode == http.StatusOK {
					if err := throttle.SettleResponse(resp, out.Usage.TotalTokens); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	srv.mu.Lock()
	defer srv.mu.Unlock()
	return srv.rejected, srv.used / (capacity + rate*elapsed.Seconds())
}

// TestSettleFakeLLM: 8 and 32 goroutines through one Transport against a
// fake LLM API that counts the tokens used for a minute, each request
// estimated at its max_tokens (200 to 800). Used ±50% of the estimate:
// settled from the usage, the client keeps the server's count (a 429 now
// and then from the differences in flight); not settled, it drifts from
// it and collects more. Used 50% to 100% (a max_tokens rarely reached):
// not settled, the client spends a quarter of the limit on tokens never
// used.
func TestSettleFakeLLM(t *testing.T) {
	const run = time.Minute
	for _, tt := range []struct {
		name string
		used [2]float64
	}{{"±50%", [2]float64{0.5, 1.5}}, {"50-100%", [2]float64{0.5, 1}}} {
		for _, g := range []int{8, 32} {
			var got [2]struct {
				rejected int
				goodput  float64
			}
			for i, settle := range []bool{true, false} {
				synctest.Test(t, func(t *testing.T) {
					got[i].rejected, got[i].goodput = llmRun(t, g, settle, tt.used, run)
				})
			}
			t.Logf("used %s, %2d goroutines: settled %2d 429s, goodput %.3f; not settled %2d 429s, goodput %.3f",
				tt.name, g, got[0].rejected, got[0].goodput, got[1].rejected, got[1].goodput)
			if got[0].goodput < 0.95 || got[0].rejected > 10 {
				t.Errorf("used %s, %d goroutines, settled: %d 429s, goodput %.3f; want ≤ 10, ≥ 0.95", tt.name, g, got[0].rejected, got[0].goodput)
			}
			if got[0].goodput < got[1].goodput-0.01 {
				t.Errorf("used %s, %d goroutines: settling lowered the goodput: %.3f; not settled %.3f", tt.name, g, got[0].goodput, got[1].goodput)
			}
		}
	}
}
