package throttle_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/throttle-go/throttle"
)

// An API that allows 2 concurrent requests per key (GitHub allows 100):
// the Limiter's InFlight caps what a Transport has in flight. Six
// requests sent at once go two at a time; each holds its slot until its
// response body is read to the end or closed.
func ExampleLimiter_inFlight() {
	var (
		now, most atomic.Int32
		pair      sync.WaitGroup // the first two requests meet in flight
	)
	pair.Add(2)
	api := roundTripper(func(r *http.Request) (*http.Response, error) {
		n := now.Add(1)
		defer now.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		if r.URL.Path == "/1" || r.URL.Path == "/2" {
			pair.Done()
			pair.Wait() // would never return under a cap of 1
		}
		return &http.Response{StatusCode: 200, Header: http.Header{}, Request: r,
			Body: io.NopCloser(strings.NewReader("ok"))}, nil
	})
	client := &http.Client{Transport: &throttle.Transport{
		Base:   api,
		Waiter: &throttle.Limiter{InFlight: 2},
	}}
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			resp, err := client.Get(fmt.Sprintf("https://api.example/%d", i+1))
			if err != nil {
				fmt.Println(err)
				return
			}
			io.Copy(io.Discard, resp.Body) // read to EOF: the slot comes back
			resp.Body.Close()
		})
	}
	wg.Wait()
	fmt.Println("most in flight:", most.Load())
	// Output: most in flight: 2
}

// A queue worker holds a slot of its key's in-flight cap for the whole
// job, and waits for its turn under the key's rate while holding it: if
// the wait fails, it gives the slot back, so nothing is held.
func ExampleQuota_Acquire() {
	lim := &throttle.Limiter{Limits: []throttle.Limit{{Rate: 100, Burst: 10}}, InFlight: 4}
	key := lim.For("reports")
	ctx := context.Background()

	release, err := key.Acquire(ctx, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer release() // a second call would do nothing
	if err := key.WaitN(ctx, 1); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("job runs with one of 4 slots")
	// Output: job runs with one of 4 slots
}

// roundTripper is a func-typed http.RoundTripper.
type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
