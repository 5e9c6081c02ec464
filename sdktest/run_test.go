package sdktest_test

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/throttle-go/throttle"
)

// bubbleStart is when the clock of a test's bubble starts: in 2025, since
// a bubble's own starts in 2000, and GitHub's x-ratelimit-reset is epoch
// seconds, which the Transport tells from a delay by its size (an epoch
// from 1e9 s, September 2001, on); 400ms past a whole second, so that the
// whole-second resets round up as they do on a running clock.
var bubbleStart = time.Date(2025, 1, 1, 0, 0, 0, 400e6, time.UTC)

// bubble runs f in a synctest bubble whose clock reads bubbleStart: the
// client, the Transport and the fake (in-process) run on the bubble's
// fake clock, so that waits for resets and retries take no real time and
// every duration measured is exact.
func bubble(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		time.Sleep(time.Until(bubbleStart))
		f(t)
	})
}

// result is what a batch of calls came to, as the caller saw it.
type result struct {
	ok     int
	errs   map[string]int // error kind → count
	times  []time.Duration
	wall   time.Duration
	events map[string]int // event kind (and give-up reason) → count
}

// recorder counts a Transport's events.
type recorder struct {
	mu sync.Mutex // protects n
	n  map[string]int
}

func (r *recorder) on(e throttle.Event) {
	k := e.Kind.String()
	if e.Kind == throttle.EventGiveUp {
		k += ": " + e.Reason
	}
	r.mu.Lock()
	if r.n == nil {
		r.n = make(map[string]int)
	}
	r.n[k]++
	r.mu.Unlock()
}

func (r *recorder) counts() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.n))
	for k, v := range r.n {
		out[k] = v
	}
	return out
}

// runCalls makes n calls, at most par at once, each with its own timeout,
// and sorts their errors with kind.
func runCalls(n, par int, timeout time.Duration, call func(ctx context.Context, i int) error, kind func(error) string) result {
	res := result{errs: make(map[string]int)}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, par)
	start := time.Now()
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			t0 := time.Now()
			err := call(ctx, i)
			d := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			res.times = append(res.times, d)
			if err == nil {
				res.ok++
			} else {
				res.errs[kind(err)]++
			}
		})
	}
	wg.Wait()
	res.wall = time.Since(start)
	sort.Slice(res.times, func(i, j int) bool { return res.times[i] < res.times[j] })
	return res
}

// median of sorted durations.
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[len(ds)/2]
}

// attemptStats summarises attempts per call.
func attemptStats(a []int) (mean float64, maxN int) {
	if len(a) == 0 {
		return 0, 0
	}
	sum := 0
	for _, n := range a {
		sum += n
		maxN = max(maxN, n)
	}
	return float64(sum) / float64(len(a)), maxN
}

func (r result) String() string {
	var errs []string
	for k, v := range r.errs {
		errs = append(errs, fmt.Sprintf("%s×%d", k, v))
	}
	sort.Strings(errs)
	return fmt.Sprintf("ok %d, errors [%s], median %v, max %v, wall %v",
		r.ok, strings.Join(errs, " "), median(r.times).Round(time.Millisecond),
		r.times[len(r.times)-1].Round(time.Millisecond), r.wall.Round(time.Millisecond))
}

// transportClient returns an http.Client over tr.
func transportClient(tr http.RoundTripper) *http.Client {
	return &http.Client{Transport: tr}
}
