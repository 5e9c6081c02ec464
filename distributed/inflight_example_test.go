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
// token. Fifty pods share both through one Quota: the Transport takes a
// lease under the cap before each attempt's wait and gives it back when
// the response body is closed or read to the end. A pod killed with
// kill -9 gives its leases back within LeaseTTL.
func ExampleQuota_inFlight() {
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	defer client.Close()

	q := distributed.New(client, "github", 5000.0/3600, 100)
	q.InFlight = 100
	q.LeaseTTL = 30 * time.Second // the default; longer than any request is not needed: leases are renewed
	q.Workers = 50                // if Redis is away: 2 in flight per pod
	defer q.Close()

	hc := &http.Client{Transport: &throttle.Transport{Waiter: q}}
	resp, err := hc.Get("https://api.github.com/rate_limit")
	if err != nil {
		log.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close() // the lease goes back
}
