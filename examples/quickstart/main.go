// Quickstart: the same load against a rate-limited API, first through a
// bare http.Client, then through a throttle.Transport.
//
//	go run ./examples/quickstart
//	go run ./examples/quickstart -n 500 -rate 100 -burst 20 -c 64
//
// The API runs in this process on 127.0.0.1; nothing else is needed. It
// allows -rate requests per second with a burst of -burst (a token bucket,
// see server.go) and answers 429 with Retry-After and rate-limit headers
// beyond that. Each phase meets a fresh API, so both start with a full
// bucket.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"time"

	"golang.org/x/time/rate"

	"github.com/throttle-go/throttle"
)

func main() {
	n := flag.Int("n", 1000, "requests per phase")
	limit := flag.Float64("rate", 50, "the API's limit, in requests per second")
	burst := flag.Int("burst", 10, "the API's burst: requests it accepts at once")
	c := flag.Int("c", 32, "goroutines sending at once")
	flag.Parse()
	if *n < 1 || *limit <= 0 || *burst < 1 || *c < 1 {
		fmt.Fprintln(os.Stderr, "quickstart: -n, -rate, -burst and -c must be positive")
		os.Exit(2)
	}

	// Ctrl-C ends the current phase early; the program still cleans up.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	fmt.Printf("An API allowing %g requests/s (burst %d). Each phase sends %d GETs from %d goroutines.\n\n",
		*limit, *burst, *n, *c)

	bare := run(ctx, "bare http.Client", *n, *c, *limit, *burst,
		func(base http.RoundTripper, _ *tally) http.RoundTripper {
			return base // send each request once; a bare client does not retry
		})

	fmt.Printf("  (the throttled phase paces itself: about %.0fs at %g/s)\n", float64(*n-1) / *limit, *limit)
	throttled := run(ctx, "throttle.Transport", *n, *c, *limit, *burst,
		func(base http.RoundTripper, t *tally) http.RoundTripper {
			return withThrottle(base, *limit, t)
		})

	fmt.Println()
	printTable(*limit, bare, throttled)
}

// withThrottle is all a program adds: a Transport around its own, with a
// Limiter set to the API's published rate. OnEvent counts the retries.
//
// Burst 1 spreads the requests evenly, and the API's own burst then absorbs
// the network's jitter. A client burst as large as the server's would leave
// no slack: a request arriving a hair early is refused, and its Retry-After
// of a whole second stalls every request to the API.
func withThrottle(base http.RoundTripper, limit float64, t *tally) http.RoundTripper {
	return &throttle.Transport{
		Base:   base,
		Waiter: &throttle.Limiter{Limits: []throttle.Limit{{Rate: rate.Limit(limit), Burst: 1}}},
		OnEvent: func(e throttle.Event) {
			if e.Kind == throttle.EventRetry {
				t.retries.Add(1)
			}
		},
	}
}

// result is what one phase saw: the client's final outcomes, the server's
// counts and the wall time.
type result struct {
	name                      string
	sent                      int
	client                    *tally
	arrivals, served, refused int64
	wall                      time.Duration
}

// run sends n requests from c goroutines to a fresh API through the
// RoundTripper that wrap builds around a plain HTTP transport, and returns
// what happened. It leaves nothing running behind it.
func run(ctx context.Context, name string, n, c int, limit float64, burst int,
	wrap func(base http.RoundTripper, t *tally) http.RoundTripper) result {
	api := newAPI(limit, burst)
	srv := httptest.NewServer(api)
	defer srv.Close()

	// The same base in both phases: keep a connection per goroutine.
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConnsPerHost = c
	defer base.CloseIdleConnections()

	t := new(tally)
	client := &http.Client{Transport: wrap(base, t), Timeout: time.Minute}
	p := startProgress(name, n, t)
	start := time.Now()
	load(ctx, client, srv.URL, n, c, t)
	wall := time.Since(start)
	p.end()

	return result{
		name:     name,
		sent:     int(t.done.Load()),
		client:   t,
		arrivals: api.arrivals.Load(),
		served:   api.served.Load(),
		refused:  api.refused.Load(),
		wall:     wall,
	}
}

func printTable(limit float64, rs ...result) {
	row := func(label string, cell func(r result) string) {
		fmt.Printf("%-28s", label)
		for _, r := range rs {
			fmt.Printf("%20s", cell(r))
		}
		fmt.Println()
	}
	perSec := func(count int64, d time.Duration) string {
		return fmt.Sprintf("%.1f/s", float64(count)/d.Seconds())
	}
	row("", func(r result) string { return r.name })
	row("requests", func(r result) string { return fmt.Sprint(r.sent) })
	row("2xx", func(r result) string { return fmt.Sprint(r.client.ok.Load()) })
	row("429s (final, client side)", func(r result) string { return fmt.Sprint(r.client.limited.Load()) })
	if rs[0].client.other.Load()+rs[0].client.failed.Load()+rs[1].client.other.Load()+rs[1].client.failed.Load() > 0 {
		row("other statuses, errors", func(r result) string {
			return fmt.Sprintf("%d, %d", r.client.other.Load(), r.client.failed.Load())
		})
	}
	row("429s the server sent", func(r result) string { return fmt.Sprint(r.refused) })
	row("retries", func(r result) string { return fmt.Sprint(r.client.retries.Load()) })
	row("requests the server got", func(r result) string { return fmt.Sprint(r.arrivals) })
	row(fmt.Sprintf("arrival rate (limit %g/s)", limit), func(r result) string { return perSec(r.arrivals, r.wall) })
	row("2xx rate", func(r result) string { return perSec(r.served, r.wall) })
	row("wall time", func(r result) string { return r.wall.Round(10 * time.Millisecond).String() })
}
