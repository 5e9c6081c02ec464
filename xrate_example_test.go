package throttle_test

import (
	"context"
	"fmt"
	"time"

	"github.com/throttle-go/throttle"
	"golang.org/x/time/rate"
)

// A key under x/time/rate's names: a bucket of 3 refilling one unit a
// minute lets 3 through at once; SetRate changes it while it runs (the
// bucket keeps its units), and a rate of 0 lets nothing more through, as
// in x/time/rate.
func ExampleQuota_xrate() {
	lim := &throttle.Limiter{Limits: []throttle.Limit{{Rate: rate.Every(time.Minute), Burst: 3}}}
	k := lim.For("tenant-42")
	ctx := context.Background()

	for i := range 4 {
		fmt.Printf("job %d allowed: %v\n", i, k.Allow())
	}
	st, _ := k.State(ctx)
	fmt.Printf("tokens %.0f, limit %.4f/s, burst %v\n", st.Tokens, st.Rate, st.Burst)

	_ = lim.SetRate("tenant-42", 0, 3) // stop: no refill
	st, _ = k.State(ctx)
	fmt.Println("after SetRate(0), allowed:", k.Allow(), "limit", st.Rate)

	_ = lim.SetRate("tenant-42", rate.Inf, 3) // no limit
	fmt.Println("after SetRate(rate.Inf), allowed:", k.AllowN(100))
	// Output:
	// job 0 allowed: true
	// job 1 allowed: true
	// job 2 allowed: true
	// job 3 allowed: false
	// tokens 0, limit 0.0167/s, burst 3
	// after SetRate(0), allowed: false limit 0
	// after SetRate(rate.Inf), allowed: true
}
