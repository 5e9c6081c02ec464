package distributed

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/throttletest"
)

// TestFleetLLMLimits: the measurement through Redis. Four
// processes (four Limiters and Transports in this test, each with its own
// Redis client: separate OS processes would add nothing the script does
// not already see, since every decision is the script's) share the
// limits of an httptest throttletest.LLM server: 150 requests AND
// 50,000 tokens per 2 s window (the tokens bind), 8 in flight, 50 ms a
// completion, tokens used 50% to 150% of the estimate (max_tokens, 200
// to 800), 8 goroutines each (32 in all), 3 windows (6 s; 10 windows, 20 s,
// with THROTTLE_LONG=1 or THROTTLE_FLEET_LLM=1) on the real clock, each
// response's usage settled (SettleResponse: op msettle). Each
// Transport waits, as TestLLMLimits, for the estimate (a completion that
// used more is charged by the server before the fleet can know: a few
// 429s, one a window allowed, about 1%) or for the bound (1.5× the
// estimate: the fleet's count is never below the server's, so no 429 can
// come but from the clocks: Redis's TIME and the server's are the same
// machine's clock here), and the settles give back what was not used.
// Goals: goodput ≥ 0.95 of the tokens limit over the run's windows, never
// more than 8 in flight at the server, 0 429s waiting for the bound.
func TestFleetLLMLimits(t *testing.T) {
	t.Parallel()
	s, _ := startRedis(t)
	windows := 3
	if os.Getenv("THROTTLE_FLEET_LLM") != "" || longRun() {
		windows = 10
	}
	for _, tt := range []struct {
		name    string
		reserve float64
		max429  int // a window
	}{{"estimate", 1, 1}, {"bound", 1.5, 0}} {
		t.Run(tt.name, func(t *testing.T) { fleetLLM(t, s.Addr(), tt.name, tt.reserve, tt.max429*windows, windows) })
	}
}

func fleetLLM(t *testing.T, addr, name string, reserve float64, max429, windows int) {
	const (
		rpm, tpm, window = 150, 50000, 2 * time.Second
		inFlight, gen    = 8, 50 * time.Millisecond
	)
	run := time.Duration(windows) * window
	srv := throttletest.NewLLM(rpm, tpm, window)
	srv.MaxInFlight, srv.Gen = inFlight, gen
	// Start on a window's boundary, so that the run covers whole windows.
	time.Sleep(time.Until(time.Now().Truncate(window).Add(window)))
	start := time.Now()
	end := start.Add(run)
	rng := rand.New(rand.NewPCG(1, 7))
	var used int64 // tokens used by the requests admitted in the run
	srv.Used = func(est int) int {
		n := int(math.Round(float64(est) * (0.5 + rng.Float64())))
		if time.Now().Before(end) {
			used += int64(n)
		}
		return n
	}
	api := httptest.NewServer(srv)
	defer api.Close()
	var wg sync.WaitGroup
	for p := range 4 {
		q := New(newClient(t, addr), "llm-limits-"+name,
			throttle.Limit{Unit: "requests", Count: rpm, Per: window}, throttle.Limit{Unit: "tokens", Count: tpm, Per: window})
		q.InFlight = inFlight
		q.Timeout = time.Second // a loaded machine is no outage
		defer q.Close()
		client := &http.Client{Transport: &throttle.Transport{
			Waiter: q,
			CostOf: func(r *http.Request) throttle.Cost {
				n, _ := strconv.Atoi(r.Header.Get("X-Max-Tokens"))
				return throttle.Cost{N: 1, Units: map[string]int{"requests": 1, "tokens": int(math.Ceil(reserve * float64(n)))}}
			},
		}}
		for g := range 8 {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(p), uint64(g)))
				for time.Now().Before(end) {
					est := 200 + r.IntN(601)
					req, _ := http.NewRequest("POST", api.URL+"/v1/chat/completions", strings.NewReader(fmt.Sprintf(`{"max_tokens":%d}`, est)))
					req.Header.Set("X-Max-Tokens", strconv.Itoa(est))
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
					if err != nil || resp.StatusCode != http.StatusOK {
						t.Errorf("status %d, %v", resp.StatusCode, err)
						return
					}
					if err := throttle.SettleResponse(resp, throttle.Cost{N: 1, Units: map[string]int{"requests": 1, "tokens": out.Usage.TotalTokens}}); err != nil {
						t.Error(err)
					}
				}
			})
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	st := srv.Stats()
	goodput := float64(used) / (tpm * float64(run/window))
	t.Logf("4 processes × 8 goroutines, %v: %d requests admitted (per window %v), %d 429s, tokens used in the run's windows %d of %d: goodput %.3f; peak in flight %d of %d",
		elapsed.Round(time.Millisecond), st.Admitted, srv.PerWindow(start, window), st.Rejected, used, tpm*int(run/window), goodput, srv.Peak(), inFlight)
	if st.Rejected > max429 || goodput < 0.95 || srv.Peak() > inFlight {
		t.Errorf("%d 429s, goodput %.3f, peak in flight %d; want ≤ %d, ≥ 0.95, ≤ %d", st.Rejected, goodput, srv.Peak(), max429, inFlight)
	}
}
