package distributed

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttle-go/throttle"
	"golang.org/x/time/rate"
)

// restartEnv marks a child process of TestRestartFleet; its value is the
// worker id.
const restartEnv = "THROTTLE_RESTART_HELPER"

// TestRestartFleet: 4 OS processes × 16 goroutines send 800 requests
// through throttle.Transport, sharing one Limiter of 100/s (burst 10,
// Workers 4, FailLocal), to an httptest server that enforces that same
// bucket with bare 429s. Redis is stopped 2 s in, for 2 s, and restarted
// empty; the run goes on about 4 s more, past the second it checks last.
// Every request must finish with a 200 (none refused by its 30 s
// deadline); in any 1-s window the server accepts at most 110 (burst +
// rate) plus what the fallback allowed on top (each process's local
// burst, ⌈10/4⌉ = 3: 4·3 = 12, so 112 while the outage's turns are in
// the window); and the fleet is back at ≥ 90/s of accepted requests in
// the second that starts 2 s after the restart. With THROTTLE_LONG=1:
// 1,500 requests, Redis stopped 5 s in for 3 s.
func TestRestartFleet(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("real-clock run with 4 processes: 10 s")
	}
	s, _ := startRedis(t)
	const (
		procs, goroutines = 4, 16
		limit, burst      = 100, 10
	)
	requests, stopAt, downFor := 800, 2*time.Second, 2*time.Second
	if longRun() {
		requests, stopAt, downFor = 1500, 5*time.Second, 3*time.Second
	}
	var (
		mu                 sync.Mutex
		accepted, rejected []time.Time
	)
	lim := rate.NewLimiter(limit, burst)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("warm") {
			return
		}
		now := time.Now()
		ok := lim.AllowN(now, 1)
		mu.Lock()
		if ok {
			accepted = append(accepted, now)
		} else {
			rejected = append(rejected, now)
		}
		mu.Unlock()
		if !ok {
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	defer srv.Close()

	start := time.Now().Add(1500 * time.Millisecond) // -race binaries start slowly
	var cmds []*exec.Cmd
	var outs []*strings.Builder
	for i := range procs {
		cmd := exec.Command(os.Args[0], "-test.run=^TestRestartHelper$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(),
			restartEnv+"="+strconv.Itoa(i),
			"HELPER_ADDR="+s.Addr(),
			"HELPER_URL="+srv.URL,
			"HELPER_START="+strconv.FormatInt(start.UnixNano(), 10),
			"HELPER_REQUESTS="+strconv.Itoa(requests/procs),
			"HELPER_GOROUTINES="+strconv.Itoa(goroutines),
		)
		out := new(strings.Builder)
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting worker %d: %v", i, err)
		}
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	time.Sleep(time.Until(start.Add(stopAt)))
	// A key of the test's own tells whether Redis came back empty: the
	// workers write theirs again as soon as it is back, so its size
	// cannot.
	const marker = "restart-test-marker"
	if n, err := s.Do("SET", marker, "1"); err != nil || n != "+OK" {
		t.Fatalf("SET %s = %q, %v; want +OK", marker, n, err)
	}
	s.Stop()
	stopped := time.Now()
	time.Sleep(downFor)
	s.Restart()
	restarted := time.Now()
	if n, err := s.Do("EXISTS", marker); err != nil || n != ":0" {
		t.Fatalf("after the restart EXISTS %s = %q, %v; want :0 (Redis restarted empty)", marker, n, err)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("worker %d: %v\n%s", i, err, outs[i])
		}
	}
	var done, failed int
	for i, out := range outs {
		for _, line := range strings.Split(out.String(), "\n") {
			if f, ok := strings.CutPrefix(strings.TrimSpace(line), "restart-helper: "); ok {
				var d, fl int
				fmt.Sscanf(f, "ok %d failed %d", &d, &fl)
				done, failed = done+d, failed+fl
				t.Logf("worker %d: %s", i, f)
			}
		}
	}

	mu.Lock()
	defer mu.Unlock()
	slices.SortFunc(accepted, func(a, b time.Time) int { return a.Compare(b) })
	// The most accepted in any half-open 1-s window.
	most, mostAt := 0, time.Time{}
	for i, j := 0, 0; i < len(accepted); i++ {
		for accepted[i].Sub(accepted[j]) >= time.Second {
			j++
		}
		if i-j+1 > most {
			most, mostAt = i-j+1, accepted[j]
		}
	}
	in := func(from, to time.Time) int {
		n := 0
		for _, a := range accepted {
			if !a.Before(from) && a.Before(to) {
				n++
			}
		}
		return n
	}
	back := in(restarted.Add(2*time.Second), restarted.Add(3*time.Second))
	var perSec []int
	for at := start; at.Before(accepted[len(accepted)-1]); at = at.Add(time.Second) {
		perSec = append(perSec, in(at, at.Add(time.Second)))
	}
	t.Logf("%d requests: %d ok, %d failed; server accepted %d, rejected %d (429s %.1f%% of arrivals); Redis down %v–%v after start",
		requests, done, failed, len(accepted), len(rejected), 100*float64(len(rejected))/float64(len(accepted)+len(rejected)),
		stopped.Sub(start).Round(time.Millisecond), restarted.Sub(start).Round(time.Millisecond))
	t.Logf("accepted per second from the start: %v; most in any 1 s: %d (from %v after start); in the second from restart+2 s: %d",
		perSec, most, mostAt.Sub(start).Round(time.Millisecond), back)
	if done != requests || failed != 0 {
		t.Errorf("%d of %d requests finished with a 200, %d failed; want every one", done, requests, failed)
	}
	if most > limit+burst+procs*((burst+procs-1)/procs) {
		t.Errorf("%d accepted in one 1 s window; want ≤ %d (burst + rate, plus the fallback's local bursts)", most, limit+burst+procs*((burst+procs-1)/procs))
	}
	if back < 90 {
		t.Errorf("%d accepted in the second from restart+2 s; want ≥ 90 (90%% of 100/s)", back)
	}
}

// TestRestartHelper is a worker of TestRestartFleet; it does nothing in a
// normal run.
func TestRestartHelper(t *testing.T) {
	id := os.Getenv(restartEnv)
	if id == "" {
		t.Skip("a child process of TestRestartFleet")
	}
	env := func(k string) string { return os.Getenv("HELPER_" + k) }
	startNs, _ := strconv.ParseInt(env("START"), 10, 64)
	requests, _ := strconv.Atoi(env("REQUESTS"))
	goroutines, _ := strconv.Atoi(env("GOROUTINES"))
	client := redis.NewClient(&redis.Options{Addr: env("ADDR"), ContextTimeoutEnabled: true, MaxRetries: -1})
	defer client.Close()
	q := New(client, "restart", throttle.Limit{Rate: 100, Burst: 10})
	q.Workers = 4
	defer q.Close()
	hc := &http.Client{Transport: &throttle.Transport{
		Base:   &http.Transport{MaxIdleConnsPerHost: 64},
		Waiter: q,
		Key:    func(*http.Request) string { return "api" },
	}}
	// Warm up: the script loaded, a connection per goroutine.
	if err := scheduleScript.Load(context.Background(), client).Err(); err != nil {
		t.Fatalf("loading the script: %v", err)
	}
	var warm sync.WaitGroup
	for range goroutines {
		warm.Go(func() {
			client.Ping(context.Background())
			if resp, err := http.Get(env("URL") + "/?warm=1"); err == nil {
				resp.Body.Close()
			}
		})
	}
	warm.Wait()
	time.Sleep(time.Until(time.Unix(0, startNs)))
	var next, ok, failed atomic.Int64
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for next.Add(1) <= int64(requests) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, env("URL")+"/?w="+id, nil)
				resp, err := hc.Do(req)
				cancel()
				switch {
				case err != nil:
					failed.Add(1)
					var de *throttle.DeadlineError
					if errors.As(err, &de) {
						t.Logf("refused by deadline: %v", err)
					} else {
						t.Logf("error: %v", err)
					}
				case resp.StatusCode != http.StatusOK:
					failed.Add(1)
					resp.Body.Close()
					t.Logf("final status %d", resp.StatusCode)
				default:
					ok.Add(1)
					resp.Body.Close()
				}
			}
		})
	}
	wg.Wait()
	fmt.Printf("restart-helper: ok %d failed %d\n", ok.Load(), failed.Load())
}
