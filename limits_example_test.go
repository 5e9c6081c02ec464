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

// A server that keeps each request's time and allows 3 in any minute
// (a sliding log): Window.Log counts exactly as it does, so no phase of
// the minute lets a fourth through. A try spends nothing when it cannot
// go, and says when it could.
func ExampleWindow_log() {
	lim := &throttle.Limiter{
		Limits: []throttle.UnitLimit{
			{Unit: "requests", Window: throttle.Window{Count: 3, Per: time.Minute, Log: true}},
		},
	}
	key := lim.For("api.example.com").(throttle.CostTrier)
	one := throttle.Cost{Units: []throttle.UnitCost{{Unit: "requests", N: 1}}}
	for i := range 4 {
		ok, retryIn, err := key.TryCost(context.Background(), one)
		switch {
		case err != nil:
			fmt.Println(err)
		case ok:
			fmt.Printf("request %d: sent\n", i+1)
		default:
			fmt.Printf("request %d: not before %v, when the first leaves the minute\n", i+1, retryIn.Round(time.Second))
		}
	}
	fmt.Println(lim.LimitStates("api.example.com")[0].Remaining, "left")

	// A log keeps at most MaxLogCount times a key: 5,000 an hour is a
	// Sliding window's.
	big := &throttle.Limiter{Limits: []throttle.UnitLimit{
		{Unit: "requests", Window: throttle.Window{Count: 5000, Per: time.Hour, Log: true}},
	}}
	_, _, err := big.For("api.example.com").(throttle.CostTrier).TryCost(context.Background(), one)
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
// ended), not on the clock's minute. Window.FirstUse counts as it does:
// the fourth request's turn is a minute after the first's, whatever the
// time of day.
func ExampleWindow_firstUse() {
	lim := &throttle.Limiter{
		Limits: []throttle.UnitLimit{
			{Unit: "requests", Window: throttle.Window{Count: 3, Per: time.Minute, FirstUse: true}},
		},
	}
	key := lim.For("api.example.com").(throttle.CostTrier)
	one := throttle.Cost{Units: []throttle.UnitCost{{Unit: "requests", N: 1}}}
	for i := range 4 {
		ok, retryIn, err := key.TryCost(context.Background(), one)
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
