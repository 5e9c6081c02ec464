package throttle_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/throttle-go/throttle"
)

// A queue worker that would rather requeue a job than wait: Try spends
// the units now or not at all, and says when to come back.
func ExampleQuota_Try() {
	lim := &throttle.Limiter{Limits: []throttle.Limit{{Rate: 1, Burst: 2}}} // per tenant: 1 job a second, 2 at once
	ctx := context.Background()
	for job := 1; job <= 3; job++ {
		ok, retryIn, err := lim.For("acme").Try(ctx)
		switch {
		case err != nil:
			fmt.Printf("job %d: %v\n", job, err)
		case ok:
			fmt.Printf("job %d runs\n", job)
		default:
			fmt.Printf("job %d requeued for %v\n", job, retryIn.Round(100*time.Millisecond))
		}
	}
	// Output:
	// job 1 runs
	// job 2 runs
	// job 3 requeued for 1s
}

// A bucket of 50 and 200 concurrent non-blocking callers: exactly 50 go.
func ExampleQuota_Allow() {
	lim := &throttle.Limiter{Limits: []throttle.Limit{{Rate: rate.Every(time.Hour), Burst: 50}}}
	key := lim.For("acme")
	var went atomic.Int32
	var wg sync.WaitGroup
	for range 200 {
		wg.Go(func() {
			if key.Allow() {
				went.Add(1)
			}
		})
	}
	wg.Wait()
	fmt.Println(went.Load(), "of 200 went")
	// Output:
	// 50 of 200 went
}

// Turns taken ahead of time: each reservation's delay follows the key's
// state, so cancelling one moves those behind it up.
func ExampleReservation() {
	lim := &throttle.Limiter{Limits: []throttle.Limit{{Rate: 10, Burst: 1}}}
	key := lim.For("acme")
	ctx := context.Background()
	var rs []throttle.Reservation
	for range 3 {
		r, err := key.ReserveN(ctx, 1)
		if err != nil {
			fmt.Println(err)
			return
		}
		rs = append(rs, r)
	}
	round := func(d time.Duration) time.Duration { return d.Round(50 * time.Millisecond) }
	fmt.Println("delays:", round(rs[0].Delay()), round(rs[1].Delay()), round(rs[2].Delay()))
	rs[1].Cancel() // its unit goes to the next in line
	fmt.Println("after a cancel:", round(rs[2].Delay()))
	if err := rs[2].Wait(ctx); err != nil {
		fmt.Println(err)
	}
	fmt.Println("after Wait:", round(rs[2].Delay()))
	// Output:
	// delays: 0s 100ms 200ms
	// after a cancel: 100ms
	// after Wait: 0s
}

// A key's state, read without changing it.
func ExampleQuota_State() {
	lim := &throttle.Limiter{Limits: []throttle.Limit{{Rate: 1, Burst: 5}}}
	key := lim.For("acme")
	ctx := context.Background()
	for range 3 {
		_ = key.Wait(ctx)
	}
	st, _ := key.State(ctx)
	fmt.Printf("remaining %v of %v at %v/s, next turn in %v\n", st.Remaining, st.Burst, st.Rate, st.Next)
	_ = key.Pause(ctx, 10*time.Second)
	st, _ = key.State(ctx)
	fmt.Printf("paused for %v, remaining %v\n", st.Paused.Round(time.Second), st.Remaining)
	// Output:
	// remaining 2 of 5 at 1/s, next turn in 0s
	// paused for 10s, remaining 0
}

// A key's rate changed while the program runs: the waits queued on it
// take the new pace from then on.
func ExampleLimiter_SetRate() {
	lim := &throttle.Limiter{Limits: []throttle.Limit{{Rate: 1, Burst: 1}}}
	key := lim.For("acme")
	ctx := context.Background()
	_ = key.Wait(ctx)
	st, _ := key.State(ctx)
	fmt.Println("next turn at 1/s:", st.Next.Round(100*time.Millisecond))
	if err := lim.SetRate("acme", 10, 1); err != nil {
		fmt.Println(err)
		return
	}
	st, _ = key.State(ctx)
	fmt.Println("next turn at 10/s:", st.Next.Round(100*time.Millisecond))
	// Output:
	// next turn at 1/s: 1s
	// next turn at 10/s: 100ms
}

// A bucket of 10 refilling 5 a second, and 12 calls at once: 10 go at
// once, the 11th and 12th a refill (200 ms) apart. The delays are the
// turns each call would sleep until, read without sleeping.
func ExampleQuota_ReserveN() {
	lim := &throttle.Limiter{Limits: []throttle.Limit{{Rate: 5, Burst: 10}}}
	key := lim.For("acme")
	ctx := context.Background()
	var delays []time.Duration
	for range 12 {
		r, err := key.ReserveN(ctx, 1)
		if err != nil {
			fmt.Println(err)
			return
		}
		delays = append(delays, r.Delay().Round(10*time.Millisecond))
	}
	fmt.Println(delays)
	// Output:
	// [0s 0s 0s 0s 0s 0s 0s 0s 0s 0s 200ms 400ms]
}

// A job that needs requests and tokens takes its turn on both without
// waiting for it, and gives it back if it would come too late: tokens
// 100 a second (burst 100), 60 a job.
func ExampleQuota_Reserve() {
	lim := &throttle.Limiter{Limits: []throttle.Limit{
		{Rate: 10, Burst: 10},
		{Unit: "tokens", Rate: 100, Burst: 100},
	}}
	key := lim.For("acme")
	ctx := context.Background()
	job := throttle.Cost{N: 1, Units: map[string]int{"tokens": 60}}
	for i := range 3 {
		r, err := key.Reserve(ctx, job)
		if err != nil {
			fmt.Println(err)
			return
		}
		d := r.Delay().Round(10 * time.Millisecond)
		if d > 500*time.Millisecond {
			r.Cancel() // its tokens go back to the jobs behind it
			fmt.Printf("job %d: requeued (%v away)\n", i, d)
			continue
		}
		fmt.Printf("job %d: in %v\n", i, d)
	}
	// Output:
	// job 0: in 0s
	// job 1: in 200ms
	// job 2: requeued (800ms away)
}
