package throttle_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/throttle-go/throttle"
)

// MaxQueued bounds each key's queue: under a spike, a wait that would
// queue past it fails at once with ErrQueueFull, spending nothing, where
// it would otherwise hold a goroutine until its turn. Here a key of 1
// unit a second spends its burst, one wait is queued (a reservation), and
// the next job is refused.
func ExampleLimiter_maxQueued() {
	ctx := context.Background()
	lim := &throttle.Limiter{Limits: []throttle.Limit{{Rate: 1, Burst: 1}}, MaxQueued: 1}
	lim.For("tenant-1").Wait(ctx)            // the burst
	r, _ := lim.For("tenant-1").Reserve(ctx) // the queue's one unit
	defer r.Cancel()

	err := lim.For("tenant-1").Wait(ctx)
	if errors.Is(err, throttle.ErrQueueFull) {
		fmt.Println("shed:", err) // e.g. answer 503 instead of queueing
	}
	// Output:
	// shed: throttle: wait for 1 units of "tenant-1" would queue past MaxQueued 1 (1 queued): throttle: queue full
}
