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
)

// Fifty pods share one API key allowed 100 requests a second. Each pod
// makes the same Limiter; Redis keeps the key's quota they all spend.
func Example() {
	client := redis.NewClient(&redis.Options{
		Addr:                  "localhost:6379",
		ContextTimeoutEnabled: true, // cheaper calls; Limiter.Timeout holds either way
	})
	defer client.Close()

	lim := distributed.New(client, "github-api", throttle.Limit{Rate: 100, Burst: 10})
	lim.Workers = 50 // if Redis is away, each pod paces itself at 2/s

	ctx := context.Background()
	for range 3 {
		if err := lim.WaitN(ctx, 1); err != nil {
			log.Fatal(err)
		}
		resp, err := http.Get("https://api.github.com/rate_limit")
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
	}
}

// "100 requests a minute, counted as a sliding window, shared by three
// instances": the same Limiter in each, here through a Transport, which
// also reads every response's rate-limit headers for the whole fleet.
func ExampleNew() {
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	defer client.Close()

	lim := distributed.New(client, "partner-api", throttle.Limit{Count: 100, Per: time.Minute, Kind: throttle.Sliding})
	lim.Workers = 3
	api := &http.Client{Transport: &throttle.Transport{Waiter: lim}}

	resp, err := api.Get("https://partner.example/v1/orders")
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
}

// A quota per key: each tenant gets its own quota of 5 requests a
// second, shared by every worker. A 429's Retry-After pauses that
// tenant's quota for the whole fleet.
func ExampleLimiter_For() {
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	defer client.Close()
	lim := distributed.New(client, "reports", throttle.Limit{Rate: 5, Burst: 5})

	tenant := lim.For("tenant-42")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := tenant.Wait(ctx)
	switch {
	case errors.Is(err, throttle.ErrWouldExceedDeadline):
		fmt.Println("busy: try later") // nothing was reserved
	case err != nil:
		log.Fatal(err)
	}
	// … the API answered 429 with Retry-After: 2:
	_ = tenant.Pause(ctx, 2*time.Second)
}

// The fail modes: what a wait does while Redis cannot answer.
func ExampleFailMode() {
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	defer client.Close()

	payments := distributed.New(client, "payments", throttle.Limit{Rate: 10, Burst: 1})
	payments.FailMode = distributed.FailClosed // never exceed: fail instead
	err := payments.WaitN(context.Background(), 1)
	if errors.Is(err, distributed.ErrStoreUnavailable) {
		fmt.Println("Redis is down; not charging")
	}

	search := distributed.New(client, "search", throttle.Limit{Rate: 1000, Burst: 100})
	search.FailMode = distributed.FailOpen // never block on Redis
	_ = search.WaitN(context.Background(), 1)
}

// At start, a program checks that its Redis keeps the limiter's state
// (no eviction policy that may drop it) and logs what the Limiter
// decides on its own while Redis is away.
func ExampleLimiter_Check() {
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer client.Close()
	lim := distributed.New(client, "github-api", throttle.Limit{Rate: 100, Burst: 10})
	lim.OnEvent = func(e throttle.Event) {
		// store-error (Err: the real cause), breaker-open (Delay: time
		// between probes), breaker-close, fallback (Reason: what the
		// FailMode did).
		slog.Warn("limiter", "event", e)
	}
	if err := lim.Check(context.Background()); errors.Is(err, distributed.ErrEvictable) {
		log.Printf("limiter state may be evicted: %v", err)
	}
}

func ExampleFailMode_String() {
	fmt.Println(distributed.FailLocal, distributed.FailOpen, distributed.FailClosed)
	// Output: FailLocal FailOpen FailClosed
}

// A queue worker that requeues a job rather than wait for the fleet's
// quota, and a look at the quota's state.
func ExampleLimiter_For_try() {
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	defer client.Close()
	lim := distributed.New(client, "reports", throttle.Limit{Rate: 5, Burst: 5})

	ctx := context.Background()
	tenant := lim.For("tenant-42")
	ok, retryIn, err := tenant.Try(ctx)
	switch {
	case err != nil:
		log.Fatal(err)
	case !ok:
		fmt.Println("requeue for", retryIn) // nothing was spent
	}
	st, err := tenant.State(ctx) // writes nothing
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%v units left, %d queued, paused for %v\n", st.Remaining, st.Queued, st.Paused)
}

// A new limit for a running fleet: deploy it with a higher Version. The
// first call of a new pod replaces the configuration the key's state was
// written with; the pods still running the old one follow it (each
// reports an EventConfig once). A pod with another limit and the same
// Version is refused rather than mixed into the key's state.
func ExampleLimiter_Version() {
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	defer client.Close()

	lim := distributed.New(client, "github-api", throttle.Limit{Rate: 150, Burst: 15}) // was 100/s, burst 10, Version 0
	lim.Version = 1
	lim.OnEvent = throttle.LogEvents(slog.Default())

	err := lim.WaitN(context.Background(), 1)
	var ce *distributed.ConfigError
	if errors.As(err, &ce) {
		log.Fatalf("another pod runs %v/s burst %d at Version %d: %v", ce.StoredRate, ce.StoredBurst, ce.StoredVersion, err)
	}
}

// An LLM API's limits for a fleet: 500 requests and 200,000 tokens a
// minute. Each call waits for a request and its estimate of tokens,
// settles the tokens its response used, and the fleet's view of the
// limits is read from Redis without spending anything.
func ExampleLimiter_For_tokens() {
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	defer client.Close()
	lim := distributed.New(client, "openai",
		throttle.Limit{Rate: 500.0 / 60, Burst: 500},
		throttle.Limit{Unit: "tokens", Rate: 200_000.0 / 60, Burst: 200_000})

	ctx := context.Background()
	model := lim.For("gpt-4o")
	estimate := throttle.Cost{N: 1, Units: map[string]int{"tokens": 1200}}
	if err := model.Wait(ctx, estimate); err != nil {
		log.Fatal(err)
	}
	// … the response's usage said 700 tokens:
	if err := model.Settle(ctx, estimate, throttle.Cost{N: 1, Units: map[string]int{"tokens": 700}}); err != nil {
		log.Fatal(err)
	}
	st, err := model.State(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, l := range st.Limits {
		fmt.Printf("%s: %.0f left\n", l.Unit, l.Remaining)
	}
}
