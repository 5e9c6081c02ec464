package throttle_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/time/rate"

	"github.com/throttle-go/throttle"
)

// An LLM API's requests per minute AND tokens per minute on one key: a
// wait spends one request and its tokens on both limits at once, or
// nothing. Each wait here may wait a second at most, so that a turn
// further off is refused at once with its delay (nothing spent).
func ExampleCostWaiter() {
	lim := &throttle.Limiter{
		Limit: rate.Every(time.Minute / 3), Burst: 3, // 3 requests a minute
		Limits: []throttle.UnitLimit{
			{Unit: "tokens", Rate: throttle.Rate{Limit: rate.Every(time.Minute / 1000), Burst: 1000}}, // 1,000 tokens a minute
		},
	}
	key := lim.For("api.openai.com").(throttle.CostWaiter)
	for i, tokens := range []int{400, 400, 400, 0, 100} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := key.WaitCost(ctx, throttle.Cost{Units: []throttle.UnitCost{{Unit: "tokens", N: tokens}}})
		cancel()
		var de *throttle.DeadlineError
		switch {
		case err == nil:
			fmt.Printf("request %d (%d tokens): sent\n", i+1, tokens)
		case errors.As(err, &de):
			fmt.Printf("request %d (%d tokens): its turn is in %v\n", i+1, tokens, de.Delay.Round(time.Second))
		default:
			fmt.Println(err)
		}
	}
	// Output:
	// request 1 (400 tokens): sent
	// request 2 (400 tokens): sent
	// request 3 (400 tokens): its turn is in 12s
	// request 4 (0 tokens): sent
	// request 5 (100 tokens): its turn is in 20s
}
