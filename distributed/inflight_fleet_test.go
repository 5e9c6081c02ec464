package distributed

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/throttletest"
	"golang.org/x/time/rate"
)

// inflightEnv marks a child process of the in-flight tests; its value is
// the worker id.
const inflightEnv = "THROTTLE_INFLIGHT_HELPER"

// startInFlightWorkers starts procs copies of the test binary running
// TestInFlightHelper with env (HELPER_* variables), and returns them with
// their output.
func startInFlightWorkers(t *testing.T, procs int, env ...string) ([]*exec.Cmd, []*strings.Builder) {
	t.Helper()
	var (
		cmds []*exec.Cmd
		outs []*strings.Builder
	)
	for i := range procs {
		cmd := exec.Command(os.Args[0], "-test.run=^TestInFlightHelper$", "-test.count=1", "-test.v")
		cmd.Env = append(append(os.Environ(), inflightEnv+"="+strconv.Itoa(i)), env...)
		out := new(strings.Builder)
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting worker %d: %v", i, err)
		}
		cmds = append(cmds, cmd)
		outs = append(outs, out)
	}
	return cmds, outs
}

// TestInFlightFleet: 4 processes share one Limiter with an in-flight cap of
// N, 4N goroutines in all, sending through a Transport to a real server
// that refuses (429) any request past N in flight. The server never sees
// more than N at once and refuses none.
func TestInFlightFleet(t *testing.T) {
	t.Parallel()
	const (
		n     = 4
		procs = 4
		perG  = 15 // requests per goroutine
		hold  = 50 * time.Millisecond
	)
	srv := startRedisServer(t)
	rc := newClient(t, srv)
	s := throttletest.NewInFlight(n, hold)
	hs := httptest.NewServer(withWarm(s))
	defer hs.Close()
	start := time.Now().Add(1500 * time.Millisecond) // -race binaries take a while to start
	calls0 := scriptCalls(t, rc)
	cmds, outs := startInFlightWorkers(t, procs,
		"HELPER_MODE=fleet",
		"HELPER_ADDR="+srv,
		"HELPER_URL="+hs.URL,
		"HELPER_CAP="+strconv.Itoa(n),
		"HELPER_GOROUTINES="+strconv.Itoa(n), // N per process: 4N in all
		"HELPER_REQUESTS="+strconv.Itoa(perG),
		"HELPER_START="+strconv.FormatInt(start.UnixNano(), 10),
	)
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("worker %d: %v\n%s", i, err, outs[i])
		}
	}
	st := s.Stats()
	var elapsed time.Duration
	for i, out := range outs {
		var d time.Duration
		for _, line := range strings.Split(out.String(), "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "inflight-helper: elapsed "); ok {
				d, _ = time.ParseDuration(v)
			}
		}
		if d == 0 {
			t.Errorf("worker %d reported no elapsed time:\n%s", i, out)
		}
		elapsed = max(elapsed, d)
	}
	calls := scriptCalls(t, rc) - calls0
	want := procs * n * perG
	perReq := float64(calls) / float64(want)
	t.Logf("%d script calls (EVALSHA and EVAL, both scripts, warm-up loads aside): %.2f per request", calls, perReq)
	// A request costs an acquisition, its wait for quota and its release
	// (3), and one more ask for each that waited for a slot (3 in 4 of
	// them, 4N goroutines for N slots): 3.75, and a few asks while each
	// process's subscription comes up. Every waiter of the key asking at
	// each release would cost about 3N more per request; polling every
	// 5ms, 10 per hold per waiter.
	if perReq > 5 {
		t.Errorf("%.2f script calls per request; want at most 5 (3.75 without waste)", perReq)
	}
	ideal := float64(n) / hold.Seconds()
	ratio := float64(st.Admitted) / elapsed.Seconds() / ideal
	t.Logf("cap %d, %d processes × %d goroutines: peak %d in flight, %d admitted, %d refused in %v: %.3f of N/hold (%.0f/s)",
		n, procs, n, s.Peak(), st.Admitted, st.Rejected, elapsed, ratio, ideal)
	if p := s.Peak(); p > n {
		t.Errorf("the server saw %d in flight; want at most %d", p, n)
	}
	if st.Rejected != 0 || st.Admitted != want {
		t.Errorf("the server admitted %d and refused %d; want %d and 0", st.Admitted, st.Rejected, want)
	}
	// A slot goes from one process to another through Redis: a release
	// call, a push, the waiter's call (three loopback round trips, about
	// a millisecond on an idle machine, several under -race on two busy
	// cores) on top of each 50ms hold. 0.6 would still catch a slot
	// that comes back only at a lease's expiry or a waiter's periodic ask.
	if ratio < 0.6 {
		t.Errorf("throughput %.3f of N/hold; want at least 0.6", ratio)
	}
}

// TestInFlightKilled: a worker holding every unit of the cap is killed
// with SIGKILL mid-request; its units come back when its leases expire,
// within LeaseTTL of the kill, and go to a process waiting for them.
func TestInFlightKilled(t *testing.T) {
	t.Parallel()
	const (
		n   = 2
		ttl = 2 * time.Second
	)
	srv := startRedisServer(t)
	s := throttletest.NewInFlight(n, time.Minute) // a request answered only when its client goes
	hs := httptest.NewServer(withWarm(s))
	defer hs.Close()
	cmds, outs := startInFlightWorkers(t, 1,
		"HELPER_MODE=hang",
		"HELPER_ADDR="+srv,
		"HELPER_URL="+hs.URL,
		"HELPER_CAP="+strconv.Itoa(n),
		"HELPER_GOROUTINES="+strconv.Itoa(n),
		"HELPER_TTL="+ttl.String(),
	)
	cmd := cmds[0]
	deadline := time.Now().Add(20 * time.Second)
	for s.Stats().Admitted < n {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("the worker sent %d requests in 20s; want %d\n%s", s.Stats().Admitted, n, outs[0])
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Mid-request: let three renewals pass (at TTL/3, 2TTL/3, TTL), and
	// kill half a period after the last, so that the units come back
	// TTL/6 before a full TTL from the kill.
	time.Sleep(ttl + ttl/6)
	c := newClient(t, srv)
	q := New(c, "killed", throttle.Limit{Rate: rate.Inf, Burst: 1000})
	q.InFlight, q.LeaseTTL, q.FailMode, q.Timeout = n, ttl, FailClosed, 2*time.Second
	defer q.Close()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	cmd.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 3*ttl)
	defer cancel()
	release, err := q.For("api").Acquire(ctx, n)
	back := time.Since(killed)
	if err != nil {
		t.Fatalf("Acquire(%d) after the holder was killed = %v after %v; want the units within LeaseTTL %v", n, err, back, ttl)
	}
	release()
	t.Logf("a killed worker's %d units came back %v after SIGKILL (LeaseTTL %v, renewed every %v)", n, back, ttl, ttl/3)
	// Renewed at most TTL/3 before the kill: back between 2/3 TTL and
	// TTL, plus a script call. Sooner would mean the leases were not
	// kept (the cap passed while the worker lived); later, not expired.
	if back > ttl+250*time.Millisecond || back < 2*ttl/3-250*time.Millisecond {
		t.Errorf("units back %v after the kill; want within [%v, %v]", back, 2*ttl/3, ttl)
	}
}

// scriptCalls returns how many EVALSHA and EVAL calls the server has run.
func scriptCalls(t *testing.T, c *redis.Client) int {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, line := range strings.Split(info, "\n") {
		for _, cmd := range []string{"cmdstat_evalsha:calls=", "cmdstat_eval:calls="} {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), cmd); ok {
				v, _, _ = strings.Cut(v, ",")
				n, _ := strconv.Atoi(v)
				total += n
			}
		}
	}
	return total
}

// withWarm serves /warm itself (the workers' warm-up, not counted) and
// everything else with h.
func withWarm(h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/warm", func(http.ResponseWriter, *http.Request) {})
	mux.Handle("/", h)
	return mux
}

// startRedisServer starts a redis-server and returns its address.
func startRedisServer(t *testing.T) string {
	t.Helper()
	s, _ := startRedis(t)
	return s.Addr()
}

// TestInFlightHelper is a worker of the in-flight tests; it does nothing
// in a normal run.
func TestInFlightHelper(t *testing.T) {
	id := os.Getenv(inflightEnv)
	if id == "" {
		t.Skip("a child process of the in-flight tests")
	}
	env := func(k string) string { return os.Getenv("HELPER_" + k) }
	capN, _ := strconv.Atoi(env("CAP"))
	goroutines, _ := strconv.Atoi(env("GOROUTINES"))
	requests, _ := strconv.Atoi(env("REQUESTS"))
	client := redis.NewClient(&redis.Options{Addr: env("ADDR"), ContextTimeoutEnabled: true})
	defer client.Close()
	name := "fleet"
	if env("MODE") == "hang" {
		name = "killed"
	}
	q := New(client, name, throttle.Limit{Rate: rate.Inf, Burst: 1000})
	q.InFlight = capN
	q.FailMode = FailClosed // a store error must show
	q.Timeout = 2 * time.Second
	if d, err := time.ParseDuration(env("TTL")); err == nil {
		q.LeaseTTL = d
	}
	defer q.Close()
	base := &http.Transport{MaxIdleConnsPerHost: 64}
	defer base.CloseIdleConnections()
	hc := &http.Client{Transport: &throttle.Transport{
		Base:   base,
		Waiter: q,
		Key:    func(*http.Request) string { return "api" },
		Retry:  throttle.RetryPolicy{MaxAttempts: 1}, // a 429 must show
	}}
	// Warm up: scripts loaded, a Redis and an HTTP connection per
	// goroutine.
	for _, s := range []*redis.Script{scheduleScript, inflightScript} {
		if err := s.Load(context.Background(), client).Err(); err != nil {
			t.Fatalf("loading a script: %v", err)
		}
	}
	var warm sync.WaitGroup
	for range goroutines {
		warm.Go(func() {
			client.Ping(context.Background())
			if resp, err := base.RoundTrip(mustGet(t, env("URL")+"/warm")); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	warm.Wait()
	if v := env("START"); v != "" {
		ns, _ := strconv.ParseInt(v, 10, 64)
		time.Sleep(time.Until(time.Unix(0, ns)))
	}
	start := time.Now()
	if env("MODE") == "hang" {
		requests = 1 // each goroutine sends one request that hangs until the kill
	}
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range requests {
				resp, err := hc.Get(env("URL") + "/?w=" + id)
				if err != nil {
					t.Errorf("Get = %v", err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	fmt.Printf("inflight-helper: elapsed %v\n", time.Since(start))
}

func mustGet(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}
