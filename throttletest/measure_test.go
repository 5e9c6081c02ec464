package throttletest_test

import (
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/distributed"
	"github.com/throttle-go/throttle/internal/measure"
	"github.com/throttle-go/throttle/internal/redistest"
	"github.com/throttle-go/throttle/throttletest"
)

// TestServersTable measures today's Transport against every server of the
// package, as issue 9's table describes, three runs each, and logs the
// medians as a Markdown table. It takes about a minute of real time (the
// strict server and the fleet run on the real clock) and is skipped unless
// THROTTLE_SERVERS=1:
//
//	THROTTLE_SERVERS=1 go test -count=1 -run TestServersTable -v ./throttletest
//
// It fails only when a scenario cannot run; the figures are the baseline
// the next step's improvements are measured against, not assertions.
func TestServersTable(t *testing.T) {
	if os.Getenv("THROTTLE_SERVERS") != "1" {
		t.Skip("set THROTTLE_SERVERS=1 to measure the Transport against every server (about a minute)")
	}
	var rows []measure.Row
	for _, sc := range scenarios() {
		t.Run(sc.name, func(t *testing.T) {
			var runs []measure.Row
			for seed := range 3 {
				r := sc.run(t, seed+1)
				t.Logf("run %d: %+v", seed+1, r)
				runs = append(runs, r)
			}
			rows = append(rows, measure.Median(runs))
		})
	}
	t.Logf("medians of 3 runs:\n%s", measure.Table(rows))
}

// scenario is one row of the table.
type scenario struct {
	name string
	real bool // on the real clock: not in the normal suite
	run  func(t *testing.T, seed int) measure.Row
}

func scenarios() []scenario {
	return []scenario{
		{"token bucket", false, tokenBucketRow(0)},
		{"token bucket with jitter", false, tokenBucketRow(time.Millisecond)},
		{"strict leaky bucket (synctest)", false, leakySynctestRow(http.StatusTooManyRequests)},
		{"strict leaky bucket, 503 (synctest)", false, leakySynctestRow(http.StatusServiceUnavailable)},
		{"strict leaky bucket (real clock)", true, leakyRealRow},
		{"sliding window", false, slidingWindowRow},
		{"fixed window IETF", false, fixedWindowRow(16)},
		{"fixed window IETF, 1 worker", false, fixedWindowRow(1)},
		{"rolling budget, 1 process", false, rollingRow},
		{"rolling budget, fleet of 4", true, fleetRow(20, time.Second, 50)},
		{"rolling budget below the told rate, fleet of 4", true, fleetRow(40, 2*time.Second, 100)},
		{"GitHub long window", false, gitHubRow},
		{"OpenAI, tokens bind, told nothing", false, openAIRow(200, false)},
		{"OpenAI, tokens bind, CostUnit tokens", false, openAIRow(200, true)},
		{"OpenAI, requests bind, told nothing", false, openAIRow(20, false)},
	}
}

// TestScenarios runs every synctest row of the table once, in the normal
// suite (about a second in all): the harness's own accounting must hold
// whatever the Transport does. Each success is one admission, each request
// ends once, and no run uses more than the capacity its row computes (a
// fraction above 1 would mean the row's capacity formula is wrong, and its
// figures with it).
func TestScenarios(t *testing.T) {
	for _, sc := range scenarios() {
		if sc.real {
			continue
		}
		t.Run(sc.name, func(t *testing.T) {
			r := sc.run(t, 1)
			if r.OK != r.Admitted {
				t.Errorf("%d successes, %d admissions; want equal", r.OK, r.Admitted)
			}
			if r.OK == 0 || r.Sent < r.OK || r.GiveUps < 0 || r.GiveUps > 1 {
				t.Errorf("sent %d, ok %d, give-ups %.3f; want 0 < ok ≤ sent, give-ups in [0, 1]", r.Sent, r.OK, r.GiveUps)
			}
			if r.Capacity <= 0 || r.Capacity > 1.0001 {
				t.Errorf("capacity used %.4f; want in (0, 1]", r.Capacity)
			}
		})
	}
}

// row fills the common columns from what the server and client saw.
func row(name string, st throttletest.Stats, res measure.Result, capacity float64, goal string, ev *measure.Events) measure.Row {
	r := measure.Row{Name: name, Wall: res.Wall, P99: res.Quantile(0.99), Goal: goal,
		Sent: res.Sent, OK: res.OK, Admitted: st.Admitted, Rejected: st.Rejected}
	if capacity > 0 {
		r.Capacity = float64(st.Admitted) / capacity
	}
	if st.Admitted > 0 {
		r.RejectsPerOK = float64(st.Rejected) / float64(st.Admitted)
	}
	if res.Sent > 0 {
		r.GiveUps = float64(res.GaveUp) / float64(res.Sent)
	}
	r.Events = ev.String()
	return r
}

// bubble runs f in a synctest bubble whose clock is moved to 2026 (see
// toPresent) and returns its row.
func bubble(t *testing.T, f func(t *testing.T) measure.Row) (r measure.Row) {
	synctest.Test(t, func(t *testing.T) {
		toPresent()
		r = f(t)
	})
	return r
}

func direct(h http.Handler, latency, jitter time.Duration, seed int) *throttletest.Direct {
	return &throttletest.Direct{Handler: h, Latency: latency, Jitter: jitter, Seed: uint64(seed)}
}

const url = "http://api.test/v1/x"

// tokenBucketRow is the anchor where the server behaves: a token bucket of
// 100/s, burst 10, Retry-After on its 429s, and the client told exactly
// that; with jitter, up to that much extra delay on the way in.
func tokenBucketRow(jitter time.Duration) func(t *testing.T, seed int) measure.Row {
	return func(t *testing.T, seed int) measure.Row {
		return bubble(t, func(t *testing.T) measure.Row {
			s := throttletest.NewTokenBucket(100, 10)
			s.RetryAfter = true
			ev := new(measure.Events)
			c := &http.Client{Transport: &throttle.Transport{OnEvent: ev.Record,
				Base:   direct(s, time.Millisecond, jitter, seed),
				Waiter: &throttle.Limiter{Limits: []throttle.Limit{{Rate: 100, Burst: 10}}},
			}}
			res := measure.Run(t.Context(), measure.Load{Client: c, URL: url, Workers: 16, Requests: 2000})
			return row(fmt.Sprintf("token bucket 100/s burst 10 + Retry-After, limit told, jitter %v", jitter), s.Stats(), res, 10+100*res.Wall.Seconds(), "0 429s, ≥ 0.99", ev)
		})
	}
}

// leakyCapacity is what a strict bucket of r/s admits in d: one now, then
// one per interval.
func leakyCapacity(r float64, d time.Duration) float64 { return 1 + math.Floor(d.Seconds()*r) }

const leakyGoal = "≤ 1% 429s, ≥ 0.97"

// leakySynctestRow: nginx limit_req 50 r/s without burst, refusing with
// status, the client told 50/s, dispatch jitter modelled as up to 1 ms on
// the way in.
func leakySynctestRow(status int) func(t *testing.T, seed int) measure.Row {
	return func(t *testing.T, seed int) measure.Row {
		return bubble(t, func(t *testing.T) measure.Row {
			time.Sleep(time.Duration(seed) * 317 * time.Microsecond) // a phase against the server's whole ms
			s := throttletest.NewLeakyBucket(50)
			s.Status = status
			ev := new(measure.Events)
			c := &http.Client{Transport: &throttle.Transport{OnEvent: ev.Record,
				Base:   direct(s, time.Millisecond, time.Millisecond, seed),
				Waiter: &throttle.Limiter{Limits: []throttle.Limit{{Rate: 50, Burst: 1}}},
			}}
			res := measure.Run(t.Context(), measure.Load{Client: c, URL: url, Workers: 8, Requests: 1000})
			return row(fmt.Sprintf("strict leaky bucket 50/s, %d bare, limit told (synctest, ≤1 ms jitter)", status), s.Stats(), res, leakyCapacity(50, res.Wall), leakyGoal, ev)
		})
	}
}

// leakyRealRow is the same on the real clock, through a real server: the
// dispatch jitter is the machine's own.
func leakyRealRow(t *testing.T, seed int) measure.Row {
	s := throttletest.NewLeakyBucket(50)
	s.Status = http.StatusTooManyRequests
	ts := httptest.NewServer(s)
	defer ts.Close()
	defer ts.Client().CloseIdleConnections()
	ev := new(measure.Events)
	c := &http.Client{Transport: &throttle.Transport{OnEvent: ev.Record,
		Base:   ts.Client().Transport,
		Waiter: &throttle.Limiter{Limits: []throttle.Limit{{Rate: 50, Burst: 1}}},
	}}
	res := measure.Run(t.Context(), measure.Load{Client: c, URL: ts.URL, Workers: 8, Requests: 300})
	return row("strict leaky bucket 50/s, 429 bare, limit told (real clock)", s.Stats(), res, leakyCapacity(50, res.Wall), leakyGoal, ev)
}

// slidingWindowRow: httprate's counter of 50 per 1 s with X-RateLimit-*
// and Retry-After: 1; the client told nothing.
func slidingWindowRow(t *testing.T, seed int) measure.Row {
	return bubble(t, func(t *testing.T) measure.Row {
		time.Sleep(time.Duration(seed) * 131 * time.Millisecond)
		s := throttletest.NewSlidingWindow(50, time.Second)
		ev := new(measure.Events)
		c := &http.Client{Transport: &throttle.Transport{OnEvent: ev.Record, Base: direct(s, time.Millisecond, time.Millisecond, seed)}}
		res := measure.Run(t.Context(), measure.Load{Client: c, URL: url, Workers: 16, Requests: 1000})
		return row("sliding window 50 per 1 s (httprate), told nothing", s.Stats(), res, 50*res.Wall.Seconds(),
			"every request succeeds, ≤ 1% 429s, ≥ 0.95", ev)
	})
}

// fixedWindowRow: IETF RateLimit/RateLimit-Policy, 50 per 1 s windows, t
// rounded up, Date 1.5 s ahead; the client told nothing.
func fixedWindowRow(workers int) func(t *testing.T, seed int) measure.Row {
	return func(t *testing.T, seed int) measure.Row {
		return bubble(t, func(t *testing.T) measure.Row {
			time.Sleep(time.Duration(seed) * 131 * time.Millisecond)
			s := throttletest.NewFixedWindow(50, time.Second)
			s.DateSkew = 1500 * time.Millisecond
			ev := new(measure.Events)
			c := &http.Client{Transport: &throttle.Transport{OnEvent: ev.Record, Base: direct(s, time.Millisecond, time.Millisecond, seed)}}
			start := time.Now()
			res := measure.Run(t.Context(), measure.Load{Client: c, URL: url, Workers: workers, Requests: 1000})
			windows := start.Add(res.Wall).Truncate(time.Second).Sub(start.Truncate(time.Second))/time.Second + 1
			return row(fmt.Sprintf("fixed window 50 per 1 s, IETF fields, t rounded up, Date +1.5 s, told nothing, %d workers", workers),
				s.Stats(), res, 50*float64(windows), "≤ 1% 429s, ≥ 0.95", ev)
		})
	}
}

// budgetCapacity is what a sliding log of q per w admits in d.
func budgetCapacity(q int, w, d time.Duration) float64 {
	return float64(q) * (1 + math.Floor(float64(d)/float64(w)))
}

// rollingRow: a sliding log of 20 per 1 s, 429 with Retry-After only; the
// client told 100/s, 5× too high.
func rollingRow(t *testing.T, seed int) measure.Row {
	return bubble(t, func(t *testing.T) measure.Row {
		s := throttletest.NewSlidingLog(20, time.Second)
		ev := new(measure.Events)
		c := &http.Client{Transport: &throttle.Transport{OnEvent: ev.Record,
			Base:   direct(s, time.Millisecond, time.Millisecond, seed),
			Waiter: &throttle.Limiter{Limits: []throttle.Limit{{Rate: 100, Burst: 10}}},
		}}
		const n = 400
		res := measure.Run(t.Context(), measure.Load{Client: c, URL: url, Workers: 8, Requests: n})
		r := row("rolling budget 20 per 1 s, 429 + Retry-After, told 100/s (1 process)", s.Stats(), res, budgetCapacity(20, time.Second, res.Wall),
			"≤ 2% 429s per success, within 5% of the budget's time", ev)
		r.Extra = fmt.Sprintf("wall ÷ budget's time %.2f", res.Wall.Seconds()/((n-20)/20.0))
		return r
	})
}

// fleetRow: a rolling budget of q per w met by 4 processes sharing one
// distributed.Limiter of 100/s on a real redis-server, on the real clock,
// 2 workers each sending each requests.
func fleetRow(q int, w time.Duration, each int) func(t *testing.T, seed int) measure.Row {
	return func(t *testing.T, seed int) measure.Row { return fleetRowOf(t, seed, q, w, each) }
}

func fleetRowOf(t *testing.T, seed, q int, w time.Duration, each int) measure.Row {
	rs := redistest.Start(t)
	s := throttletest.NewSlidingLog(q, w)
	ts := httptest.NewServer(s)
	defer ts.Close()
	defer ts.Client().CloseIdleConnections()
	const procs, workers = 4, 2
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		all measure.Result
	)
	ev := new(measure.Events) // all four processes' events
	start := time.Now()
	for p := range procs {
		client := redis.NewClient(&redis.Options{Addr: rs.Addr()})
		defer client.Close()
		q := distributed.New(client, "fleet-"+strconv.Itoa(seed), throttle.Limit{Rate: 100, Burst: 10})
		q.Workers = procs
		defer q.Close()
		c := &http.Client{Transport: &throttle.Transport{OnEvent: ev.Record, Base: ts.Client().Transport, Waiter: q}}
		wg.Go(func() {
			res := measure.Run(t.Context(), measure.Load{Client: c, URL: ts.URL, Workers: workers, Requests: workers * each, Worker: strconv.Itoa(p)})
			mu.Lock()
			defer mu.Unlock()
			all.Sent += res.Sent
			all.OK += res.OK
			all.GaveUp += res.GaveUp
			all.Latencies = append(all.Latencies, res.Latencies...)
		})
	}
	wg.Wait()
	all.Wall = time.Since(start)
	sortDurations(all.Latencies)
	n := procs * workers * each
	r := row(fmt.Sprintf("rolling budget %d per %v, 429 + Retry-After, told 100/s (fleet of 4, distributed.Limiter, real clock, %d requests)", q, w, n), s.Stats(), all, budgetCapacity(q, w, all.Wall),
		"every request done, ≤ 2% 429s per success, within 5% of the budget's time", ev)
	r.Extra = fmt.Sprintf("wall ÷ budget's time %.2f; per process %v", all.Wall.Seconds()/(float64(n-q)/float64(q)*w.Seconds()), s.PerWorker())
	return r
}

// gitHubRow: 450 of 5,000 left, reset in 50 min; the client told nothing,
// 4 workers sending until the reset.
func gitHubRow(t *testing.T, seed int) measure.Row {
	return bubble(t, func(t *testing.T) measure.Row {
		s := throttletest.NewGitHub(5000, time.Hour)
		s.Used, s.ResetIn = 4550, 50*time.Minute
		ev := new(measure.Events)
		c := &http.Client{Transport: &throttle.Transport{OnEvent: ev.Record, Base: direct(s, 50*time.Millisecond, 10*time.Millisecond, seed)}}
		start := time.Now()
		res := measure.Run(t.Context(), measure.Load{Client: c, URL: url, Workers: 4, For: 50 * time.Minute})
		reset := start.Add(50 * time.Minute)
		var first4s, before int
		var last time.Duration
		for _, at := range s.Admissions() {
			if at.Before(start.Add(4 * time.Second)) {
				first4s++
			}
			if at.Before(reset) {
				before++
				last = at.Sub(start)
			}
		}
		most, _ := s.MaxIn(time.Minute)
		r := row("GitHub: 450 of 5,000 left, reset in 50 min, told nothing", s.Stats(), res, 450, "the 450 spread over the 50 min (≈ 9 a minute)", ev)
		r.Capacity = float64(before) / 450
		r.Extra = fmt.Sprintf("in the first 4 s: %d; last of the 450 at %v; most in a minute: %d", first4s, last.Round(time.Second), most)
		return r
	})
}

// openAIRow: 60 requests and 6,000 tokens a minute, each request asking
// maxTokens (+2 prompt tokens), 8 workers for 3 minutes; told nothing, or
// CostUnit "tokens" with the exact Cost.
func openAIRow(maxTokens int, told bool) func(t *testing.T, seed int) measure.Row {
	return func(t *testing.T, seed int) measure.Row {
		return bubble(t, func(t *testing.T) measure.Row {
			s := throttletest.NewOpenAI(60, 6000)
			s.PromptTokens = 2
			cost := maxTokens + 2
			ev := new(measure.Events)
			tr := &throttle.Transport{OnEvent: ev.Record, Base: direct(s, 100*time.Millisecond, 10*time.Millisecond, seed)}
			client := "told nothing"
			if told {
				tr.CostUnit = "tokens"
				tr.CostOf = func(*http.Request) throttle.Cost { return throttle.Cost{N: cost} }
				client = `CostUnit "tokens", Cost exact`
			}
			c := &http.Client{Transport: tr}
			res := measure.Run(t.Context(), measure.Load{Client: c, URL: url, Workers: 8, For: 3 * time.Minute,
				Body: fmt.Sprintf(`{"model":"gpt","max_tokens":%d}`, maxTokens)})
			m := res.Wall.Minutes()
			capacity := min(60+60*m, (6000+6000*m)/float64(cost))
			binding := "requests"
			if (6000+6000*m)/float64(cost) < 60+60*m {
				binding = "tokens"
			}
			r := row(fmt.Sprintf("OpenAI 60 RPM / 6,000 TPM, %d tokens a request (%s bind), %s", cost, binding, client), s.Stats(), res, capacity,
				"≥ 0.95 of the binding limit, ≤ 1% 429s, p99 ≤ the wait the limits imply", ev)
			most, _ := s.MaxIn(10 * time.Second)
			r.Extra = fmt.Sprintf("successes %d; most in 10 s: %d", res.OK, most)
			return r
		})
	}
}

func sortDurations(d []time.Duration) {
	for i := 1; i < len(d); i++ {
		for j := i; j > 0 && d[j] < d[j-1]; j-- {
			d[j], d[j-1] = d[j-1], d[j]
		}
	}
}
