package distributed_test

import (
	"io"
	"log"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/distributed"
)

// GitHub allows 5,000 requests an hour and 100 concurrent requests per
// token. Fifty pods share both through one Limiter: the Transport takes a
// lease under the cap before each attempt's wait and gives it back when
// the response body is closed or read to the end. A pod killed with
// kill -9 gives its leases back within LeaseTTL.
func ExampleLimiter_inFlight() {
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	defer client.Close()

	lim := distributed.New(client, "github", throttle.Limit{Rate: 5000.0 / 3600, Burst: 100})
	lim.InFlight = 100
	lim.LeaseTTL = 30 * time.Second // the default; longer than any request is not needed: leases are renewed
	lim.Workers = 50                // if Redis is away: 2 in flight per pod
	defer lim.Close()

	hc := &http.Client{Transport: &throttle.Transport{Waiter: lim}}
	resp, err := hc.Get("https://api.github.com/rate_limit")
	if err != nil {
		log.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close() // the lease goes back
}
