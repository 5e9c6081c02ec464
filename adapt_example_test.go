package throttle_test

import (
	"context"
	"fmt"
	"time"

	"github.com/throttle-go/throttle"
)

// A queue worker that tells the key what its backend answered learns what
// the key did with it: whether a bare refusal was taken for a strict
// server's timing (retry the job at the key's next turn, no backoff), and
// how long the key is paused (less than the Retry-After where the key
// learned a budget that frees sooner).
func ExampleObserved() {
	lim := &throttle.Limiter{Limits: []throttle.Limit{{Rate: 50}}} // told the backend's exact limit, one unit deep
	key := lim.For("jobs-api")
	ctx := context.Background()

	// A job was refused with a bare 429: the first refusal shows the
	// backend strict, and the key keeps its pace.
	a, _ := key.Observe(ctx, throttle.Feedback{Verdict: throttle.RefusedBare})
	fmt.Println("first bare 429, taken for timing:", a.Timing)

	// Another, right after: the key slows down; back off.
	a, _ = key.Observe(ctx, throttle.Feedback{Verdict: throttle.RefusedBare})
	fmt.Println("second bare 429, taken for timing:", a.Timing)

	// A 429 with Retry-After: 2.
	a, _ = key.Observe(ctx, throttle.Feedback{Verdict: throttle.Refused, Pause: 2 * time.Second})
	fmt.Println("paused for:", a.Pause)
	// Output:
	// first bare 429, taken for timing: true
	// second bare 429, taken for timing: false
	// paused for: 2s
}
