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
func ExampleLimit_tokens() {
	lim := &throttle.Limiter{Limits: []throttle.Limit{
		{Rate: rate.Every(time.Minute / 3), Burst: 3},                       // 3 requests a minute
		{Unit: "tokens", Rate: rate.Every(time.Minute / 1000), Burst: 1000}, // 1,000 tokens a minute
	}}
	key := lim.For("api.openai.com")
	for i, tokens := range []int{400, 400, 400, 0, 100} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := key.Wait(ctx, throttle.Cost{N: 1, Units: map[string]int{"tokens": tokens}})
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

// A server that keeps each request's time and allows 3 in any minute
// (a sliding log): SlidingLog counts exactly as it does, so no phase of
// the minute lets a fourth through. A try spends nothing when it cannot
// go, and says when it could.
func ExampleLimit_slidingLog() {
	lim := &throttle.Limiter{
		Limits: []throttle.Limit{{Count: 3, Per: time.Minute, Kind: throttle.SlidingLog}},
	}
	key := lim.For("api.example.com")
	for i := range 4 {
		ok, retryIn, err := key.Try(context.Background())
		switch {
		case err != nil:
			fmt.Println(err)
		case ok:
			fmt.Printf("request %d: sent\n", i+1)
		default:
			fmt.Printf("request %d: not before %v, when the first leaves the minute\n", i+1, retryIn.Round(time.Second))
		}
	}
	st, _ := key.State(context.Background())
	fmt.Println(st.Limits[0].Remaining, "left")

	// A log keeps at most MaxLogCount times a key: 5,000 an hour is a
	// Sliding window's.
	big := &throttle.Limiter{
		Limits: []throttle.Limit{{Count: 5000, Per: time.Hour, Kind: throttle.SlidingLog}},
	}
	_, _, err := big.For("api.example.com").Try(context.Background())
	fmt.Println(errors.Is(err, throttle.ErrInvalidLimit))
	// Output:
	// request 1: sent
	// request 2: sent
	// request 3: sent
	// request 4: not before 1m0s, when the first leaves the minute
	// 0 left
	// true
}

// A server that counts "3 a minute from your first request": a window
// starts at a key's first request (and at the first after a window
// ended), not on the clock's minute. FromFirstUse counts as it does:
// the fourth request's turn is a minute after the first's, whatever the
// time of day.
func ExampleLimit_fromFirstUse() {
	lim := &throttle.Limiter{
		Limits: []throttle.Limit{{Count: 3, Per: time.Minute, Kind: throttle.FromFirstUse}},
	}
	key := lim.For("api.example.com")
	for i := range 4 {
		ok, retryIn, err := key.Try(context.Background())
		switch {
		case err != nil:
			fmt.Println(err)
		case ok:
			fmt.Printf("request %d: sent\n", i+1)
		default:
			fmt.Printf("request %d: not before %v, when the window from the first ends\n", i+1, retryIn.Round(time.Second))
		}
	}
	// Output:
	// request 1: sent
	// request 2: sent
	// request 3: sent
	// request 4: not before 1m0s, when the window from the first ends
}
