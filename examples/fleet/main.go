// Command fleet shows N worker processes sharing one API quota through
// Redis. It starts a local counting HTTP API on loopback, then runs copies
// of itself as workers; each sends through an http.Client whose
// throttle.Transport waits on the shared quota before every request (and
// tells it what each response said, for the whole fleet). The totals it
// prints stay at the quota's rate however many workers there are.
//
// Usage:
//
//	redis-server --port 6379 --daemonize yes
//	go run ./examples/fleet -workers 4 -rate 100 -duration 10s
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/distributed"
	"golang.org/x/time/rate"
)

func main() {
	var (
		addr     = flag.String("redis", "localhost:6379", "Redis `address`")
		workers  = flag.Int("workers", 4, "worker processes")
		limit    = flag.Float64("rate", 100, "shared quota, requests per second")
		burst    = flag.Int("burst", 10, "shared quota's burst")
		duration = flag.Duration("duration", 10*time.Second, "how long the workers send")
		// Set by the parent when it runs itself as a worker.
		workerID = flag.Int("worker", -1, "internal: run as worker `id`")
		api      = flag.String("api", "", "internal: the counting API's URL")
		quota    = flag.String("quota", "", "internal: the quota's name")
		until    = flag.Int64("until", 0, "internal: stop time, Unix ms")
		begin    = flag.Int64("start", 0, "internal: start time, Unix ms")
	)
	flag.Parse()
	// go-redis logs every failed dial; this program reports its own errors.
	redis.SetLogger(quiet{})
	if *workerID >= 0 {
		if err := work(*addr, *quota, *api, *workerID, *workers, rate.Limit(*limit), *burst, time.UnixMilli(*begin), time.UnixMilli(*until)); err != nil {
			fmt.Fprintf(os.Stderr, "fleet: worker %d: %v\n", *workerID, err)
			os.Exit(1)
		}
		return
	}
	if err := lead(*addr, *workers, *limit, *burst, *duration); err != nil {
		fmt.Fprintf(os.Stderr, "fleet: %v\n", err)
		os.Exit(1)
	}
}

// lead checks Redis, starts the API, runs the workers and reports.
func lead(addr string, workers int, limit float64, burst int, duration time.Duration) error {
	client := redis.NewClient(&redis.Options{Addr: addr, DialerRetries: 1, MaxRetries: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	err := client.Ping(ctx).Err()
	cancel()
	client.Close()
	if err != nil {
		return fmt.Errorf("no Redis at %s (%v): start one with `redis-server --port 6379 --daemonize yes` (install it with `apt-get install -y redis-server`), or pass -redis host:port", addr, err)
	}

	counts := make([]atomic.Int64, workers)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id, err := strconv.Atoi(r.URL.Query().Get("w")); err == nil && id >= 0 && id < workers {
			counts[id].Add(1)
		}
	})}
	go srv.Serve(ln)
	defer srv.Close()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	name := fmt.Sprintf("fleet-example-%d", time.Now().UnixNano()) // a fresh bucket per run
	// The workers start together once all are up, and stop together.
	start := time.Now().Add(500 * time.Millisecond)
	until := start.Add(duration)
	fmt.Printf("fleet: %d workers share %g req/s (burst %d) through Redis at %s for %v\n", workers, limit, burst, addr, duration)
	var wg sync.WaitGroup
	for i := range workers {
		cmd := exec.CommandContext(ctx, exe,
			"-worker", strconv.Itoa(i), "-workers", strconv.Itoa(workers),
			"-redis", addr, "-api", "http://"+ln.Addr().String()+"/", "-quota", name,
			"-rate", strconv.FormatFloat(limit, 'g', -1, 64), "-burst", strconv.Itoa(burst),
			"-start", strconv.FormatInt(start.UnixMilli(), 10), "-until", strconv.FormatInt(until.UnixMilli(), 10))
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			return err
		}
		wg.Go(func() { _ = cmd.Wait() })
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			total, per := snapshot(counts)
			el := max(time.Since(start).Seconds(), 0.001)
			fmt.Printf("  %4.0fs  total %5d  %6.1f req/s   per worker %v\n", el, total, float64(total)/el, per)
		case <-done:
			total, per := snapshot(counts)
			el := duration.Seconds()
			fmt.Printf("\nper worker (req/s):")
			for i, n := range per {
				fmt.Printf("  #%d %.1f", i, float64(n)/el)
			}
			fmt.Printf("\ntotal: %d requests in %v = %.1f req/s (quota %g/s + burst %d: expected ≈ %.0f requests)\n",
				total, duration, float64(total)/el, limit, burst, float64(burst)+limit*el)
			return nil
		}
	}
}

// quiet drops go-redis's log lines.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func snapshot(counts []atomic.Int64) (total int64, per []int64) {
	per = make([]int64, len(counts))
	for i := range counts {
		per[i] = counts[i].Load()
		total += per[i]
	}
	return total, per
}

// work is one worker process: 8 goroutines send through a
// throttle.Transport that waits on the shared quota, until the common stop
// time.
func work(addr, quota, api string, id, workers int, limit rate.Limit, burst int, start, until time.Time) error {
	client := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer client.Close()
	// The limits a throttle.Limiter would have; the fleet shares them.
	lim := distributed.New(client, quota, throttle.Limit{Rate: limit, Burst: burst})
	lim.Workers = workers // if Redis goes away, pace at limit/workers

	ctx, cancel := context.WithDeadline(context.Background(), until)
	defer cancel()
	url := api + "?w=" + strconv.Itoa(id)
	// Connect before the start, as a long-running worker would be: a cold
	// connection can take longer than the Limiter's 50ms store timeout, and
	// a wait that times out falls back to the local pace (FailLocal).
	var warm sync.WaitGroup
	for range 8 {
		warm.Go(func() { _ = client.Ping(ctx).Err() })
	}
	warm.Wait()
	time.Sleep(time.Until(start))
	// The Transport waits on the quota (key: the API's host) before each
	// request, and hands what each response says to it.
	hc := &http.Client{Transport: &throttle.Transport{Waiter: lim}}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []string
	)
	for range 8 {
		wg.Go(func() {
			for {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
				if err != nil {
					mu.Lock()
					errs = append(errs, err.Error())
					mu.Unlock()
					return
				}
				resp, err := hc.Do(req)
				if errors.Is(err, throttle.ErrWouldExceedDeadline) || ctx.Err() != nil {
					if err == nil {
						resp.Body.Close()
					}
					return // the run is over
				}
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					continue
				}
				mu.Lock()
				errs = append(errs, err.Error())
				mu.Unlock()
				return
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}
