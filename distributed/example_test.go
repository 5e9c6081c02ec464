package distributed_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/distributed"
	"golang.org/x/time/rate"
)

// Fifty pods share one API key allowed 100 requests a second. Each pod
// makes the same Quota; Redis keeps the one bucket they all spend.
func Example() {
	client := redis.NewClient(&redis.Options{
		Addr:                  "localhost:6379",
		ContextTimeoutEnabled: true, // cheaper calls; Quota.Timeout holds either way
	})
	defer client.Close()

	q := distributed.New(client, "github-api", 100, 10)
	q.Workers = 50 // if Redis is away, each pod paces itself at 2/s

	ctx := context.Background()
	for range 3 {
		if err := q.WaitN(ctx, 1); err != nil {
			log.Fatal(err)
		}
		resp, err := http.Get("https://api.github.com/rate_limit")
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
	}
}

// A quota per key: each tenant gets its own bucket of 5 requests a second,
// shared by every worker. A 429's Retry-After pauses that tenant's bucket
// for the whole fleet.
func ExampleQuota_For() {
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	defer client.Close()
	q := distributed.New(client, "reports", 5, 5)

	w := q.For("tenant-42")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := w.WaitN(ctx, 1)
	switch {
	case errors.Is(err, throttle.ErrWouldExceedDeadline):
		fmt.Println("busy: try later") // nothing was reserved
	case err != nil:
		log.Fatal(err)
	}
	// … the API answered 429 with Retry-After: 2:
	if p, ok := w.(throttle.Pauser); ok {
		_ = p.Pause(ctx, 2*time.Second)
	}
}

// The fail modes: what a wait does while Redis cannot answer.
func ExampleFailMode() {
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	defer client.Close()

	payments := distributed.New(client, "payments", 10, 1)
	payments.FailMode = distributed.FailClosed // never exceed: fail instead
	err := payments.WaitN(context.Background(), 1)
	if errors.Is(err, distributed.ErrStoreUnavailable) {
		fmt.Println("Redis is down; not charging")
	}

	search := distributed.New(client, "search", rate.Limit(1000), 100)
	search.FailMode = distributed.FailOpen // never block on Redis
	_ = search.WaitN(context.Background(), 1)
}

// At start, a program checks that its Redis keeps quota state (no
// eviction policy that may drop it) and logs what the Quota decides on
// its own while Redis is away.
func ExampleQuota_Check() {
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer client.Close()
	q := distributed.New(client, "github-api", 100, 10)
	q.OnEvent = func(e throttle.Event) {
		// store-error (Err: the real cause), breaker-open (Delay: time
		// between probes), breaker-close, fallback (Reason: what the
		// FailMode did).
		slog.Warn("quota", "event", e)
	}
	if err := q.Check(context.Background()); errors.Is(err, distributed.ErrEvictable) {
		log.Printf("quota state may be evicted: %v", err)
	}
}

func ExampleFailMode_String() {
	fmt.Println(distributed.FailLocal, distributed.FailOpen, distributed.FailClosed)
	// Output: FailLocal FailOpen FailClosed
}

// A queue worker that requeues a job rather than wait for the fleet's
// quota, and a look at the quota's state.
func ExampleQuota_TryN() {
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	defer client.Close()
	q := distributed.New(client, "reports", 5, 5)

	ctx := context.Background()
	ok, retryIn, err := q.For("tenant-42").(throttle.Trier).TryN(ctx, 1)
	switch {
	case err != nil:
		log.Fatal(err)
	case !ok:
		fmt.Println("requeue for", retryIn) // nothing was spent
	}
	st, err := q.For("tenant-42").(throttle.Inspector).State(ctx) // writes nothing
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%v units left, %d queued, paused for %v\n", st.Remaining, st.Queued, st.Paused)
}

// A new limit for a running fleet: deploy it with a higher Version. The
// first call of a new pod replaces the configuration the key's state was
// written with; the pods still running the old one follow it (each
// reports an EventConfig once). A pod with another limit and the same
// Version is refused rather than mixed into the bucket.
func ExampleQuota_Version() {
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	defer client.Close()

	q := distributed.New(client, "github-api", 150, 15) // was 100/s, burst 10, Version 0
	q.Version = 1
	q.OnEvent = throttle.LogEvents(slog.Default())

	err := q.WaitN(context.Background(), 1)
	var ce *distributed.ConfigError
	if errors.As(err, &ce) {
		log.Fatalf("another pod runs %v/s burst %d at Version %d: %v", ce.StoredLimit, ce.StoredBurst, ce.StoredVersion, err)
	}
}

// An LLM client's fleet-wide view of its limits: requests and tokens a
// minute, read from Redis without spending anything.
func ExampleQuota_LimitStates() {
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	defer client.Close()
	q := distributed.New(client, "openai", 500.0/60, 500) // 500 requests a minute
	q.Limits = []throttle.UnitLimit{
		{Unit: "tokens", Rate: throttle.Rate{Limit: 200_000.0 / 60, Burst: 200_000}},
	}
	states, err := q.LimitStates(context.Background(), "gpt-4o")
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range states {
		fmt.Printf("%s: %.0f left\n", s.Unit, s.Remaining)
	}
}
