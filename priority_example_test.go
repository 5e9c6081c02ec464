package throttle_test

import (
	"context"
	"fmt"
	"time"

	"github.com/throttle-go/throttle"
)

// Interactive requests ahead of a batch on one key: three background
// reservations queue behind a spent bucket of 10/s; a critical one taken
// after them goes next, and theirs move back an interval. Under a
// Transport, a request's context carries its class the same way.
func ExampleWithPriority() {
	lim := &throttle.Limiter{Limits: []throttle.Limit{{Rate: 10, Burst: 1}}}
	key := lim.For("api.example.com")
	ctx := context.Background()
	key.WaitN(ctx, 1) // the bucket spent

	batch := throttle.WithPriority(ctx, throttle.PriorityBackground)
	var queued []throttle.Reservation
	for range 3 {
		r, _ := key.Reserve(batch)
		queued = append(queued, r)
	}
	urgent, _ := key.Reserve(throttle.WithPriority(ctx, throttle.PriorityCritical))
	round := func(d time.Duration) time.Duration { return d.Round(100 * time.Millisecond) }
	fmt.Println("critical in", round(urgent.Delay()))
	for i, r := range queued {
		fmt.Printf("background %d in %v\n", i+1, round(r.Delay()))
	}
	st, _ := key.State(ctx)
	fmt.Println("queued:", st.Queued, "of them background:", st.QueuedBackground)
	// Output:
	// critical in 100ms
	// background 1 in 200ms
	// background 2 in 300ms
	// background 3 in 400ms
	// queued: 4 of them background: 3
}
