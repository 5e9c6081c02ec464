// Command worker is a queue worker that must not exceed its quotas: jobs of
// three tenants, each tenant allowed its own units per second, jobs of
// different costs (think tokens of an LLM call, or rows of a batch). It
// waits on a throttle.Limiter before each job — no HTTP involved — and
// prints each tenant's achieved rate against its limit.
//
//	go run ./examples/worker
//	go run ./examples/worker -jobs 600 -workers 8
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/throttle-go/throttle"
)

type job struct {
	tenant string
	cost   int // units of the tenant's quota the job spends
}

func main() {
	jobs := flag.Int("jobs", 300, "jobs to process")
	workers := flag.Int("workers", 8, "concurrent workers")
	flag.Parse()

	// 40 units/s for every tenant; "big-co" bought 120/s.
	lim := &throttle.Limiter{
		Limits:    []throttle.Limit{{Rate: 40, Burst: 20}},
		Overrides: map[string][]throttle.Limit{"big-co": {{Rate: 120, Burst: 60}}},
	}
	tenants := []string{"acme", "big-co", "initech"}

	queue := make(chan job)
	go func() {
		defer close(queue)
		for range *jobs {
			queue <- job{tenant: tenants[rand.IntN(len(tenants))], cost: 1 + rand.IntN(5)}
		}
	}()

	var mu sync.Mutex
	spent := map[string]int{}
	last := map[string]time.Duration{} // when each tenant's last job ran
	done := 0
	start := time.Now()
	ctx := context.Background()

	var wg sync.WaitGroup
	for range *workers {
		wg.Go(func() {
			for j := range queue {
				// Wait for the job's cost in its tenant's quota. An error
				// means the cost exceeds the burst, or ctx ended.
				if err := lim.For(j.tenant).WaitN(ctx, j.cost); err != nil {
					fmt.Fprintln(os.Stderr, "worker:", err)
					continue
				}
				mu.Lock() // "process" the job
				spent[j.tenant] += j.cost
				last[j.tenant] = time.Since(start)
				done++
				if done%50 == 0 {
					fmt.Printf("  %4d/%d jobs  %5.1fs\n", done, *jobs, time.Since(start).Seconds())
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()

	fmt.Printf("\n%-8s %6s %12s %10s\n", "tenant", "units", "steady rate", "limit")
	for _, t := range tenants {
		r := lim.Limits[0]
		if o, ok := lim.Overrides[t]; ok {
			r = o[0]
		}
		// The burst is spent at once at the start; the rest at the limit.
		steady := float64(spent[t]-r.Burst) / last[t].Seconds()
		fmt.Printf("%-8s %6d %10.1f/s %8.0f/s\n", t, spent[t], steady, float64(r.Rate))
	}
	fmt.Printf("\n%d jobs in %.1fs. No tenant runs above its limit: a busy tenant's jobs\n"+
		"wait their turn (and hold up the shared workers), the others' do not.\n", done, time.Since(start).Seconds())
}
