package distributed

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/throttletest"
)

// TestFleetSettleFakeLLM: four processes (a Limiter and a Transport each,
// each with its own Redis client) share 10,000 tokens a second, 20,000 at
// once, with 8 goroutines each, for 4 s (8 s with THROTTLE_LONG=1) on
// the real clock against an
// httptest throttletest.Usage server whose completions use 50% to 100%
// of their estimate (max_tokens, 200 to 800). Settled from the usage,
// the fleet keeps the server's count (goodput ≥ 0.9 of the limit, few
// 429s); not settled, it spends a quarter of the limit on tokens never
// used.
func TestFleetSettleFakeLLM(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("real clock and a real redis-server: about 10 s")
	}
	s, _ := startRedis(t)
	for _, settle := range []bool{true, false} {
		const rate, burst = 10000.0, 20000
		run := 4 * time.Second
		if longRun() {
			run = 8 * time.Second
		}
		srv := throttletest.NewUsage(int(60*rate), burst)
		srv.Gen = 200 * time.Millisecond
		rng := rand.New(rand.NewPCG(1, 2))
		srv.Used = func(est int) int { return int(math.Round(float64(est) * (0.5 + 0.5*rng.Float64()))) }
		api := httptest.NewServer(srv)
		var wg sync.WaitGroup
		start := time.Now()
		for p := range 4 {
			q := New(newClient(t, s.Addr()), fmt.Sprint("llm-", settle), throttle.Limit{Rate: rate, Burst: burst})
			q.Timeout = time.Second // a loaded machine is no outage
			defer q.Close()
			client := &http.Client{Transport: &throttle.Transport{
				Waiter: q,
				CostOf: func(r *http.Request) throttle.Cost {
					n, _ := strconv.Atoi(r.Header.Get("X-Max-Tokens"))
					return throttle.Cost{N: n}
				},
			}}
			for g := range 8 {
				wg.Go(func() {
					r := rand.New(rand.NewPCG(uint64(p), uint64(g)))
					for time.Since(start) < run {
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
						if settle && err == nil && resp.StatusCode == http.StatusOK {
							if err := throttle.SettleResponse(resp, throttle.Cost{N: out.Usage.TotalTokens}); err != nil {
								t.Error(err)
							}
						}
					}
				})
			}
		}
		wg.Wait()
		elapsed := time.Since(start)
		api.Close()
		st := srv.Stats()
		goodput := float64(st.Units) / (burst + rate*elapsed.Seconds())
		t.Logf("4 processes × 8 goroutines, settled %v: %d requests admitted, %d 429s, goodput %.3f of the token limit in %v",
			settle, st.Admitted, st.Rejected, goodput, elapsed.Round(time.Millisecond))
		if settle && (goodput < 0.9 || st.Rejected > st.Admitted/20) {
			t.Errorf("settled: %d 429s of %d, goodput %.3f; want ≤ 5%%, ≥ 0.9", st.Rejected, st.Arrivals, goodput)
		}
		if !settle && goodput > 0.85 {
			t.Errorf("not settled: goodput %.3f; want about 0.75 (the estimates are a third more than used)", goodput)
		}
	}
}
