package distributed_test

import (
	"context"
	"log"
	"net/http"
	"sync"

	"github.com/redis/go-redis/v9"
	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/distributed"
)

// A hot key: 32 goroutines in each of several pods send through one Limiter
// of 10,000 requests a second. Each pod leases turns in batches (one Redis
// call for many requests) and hands them to its goroutines in order;
// nothing to configure. Close gives back the turns leased and not used.
func ExampleLimiter_MaxLease() {
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	defer client.Close()
	lim := distributed.New(client, "search-api", throttle.Limit{Rate: 10000, Burst: 1000})
	defer lim.Close()
	// lim.MaxLease = 1 would make one Redis call per request, as without
	// leases; the default leases up to 256 turns a call.

	api := &http.Client{Transport: &throttle.Transport{Waiter: lim}}
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for range 100 {
				req, _ := http.NewRequestWithContext(context.Background(), "GET", "https://search.example.com/q", nil)
				resp, err := api.Do(req)
				if err != nil {
					log.Print(err)
					return
				}
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
}
