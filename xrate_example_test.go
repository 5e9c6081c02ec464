package throttle_test

import (
	"fmt"
	"time"

	"github.com/throttle-go/throttle"
	"golang.org/x/time/rate"
)

// A key under x/time/rate's names: a bucket of 3 refilling one unit a
// minute lets 3 through at once; SetBurst and SetLimit change it while it
// runs (the bucket keeps its units), and a limit of 0 lets nothing more
// through, as in x/time/rate.
func ExampleLimiter_Key() {
	lim := &throttle.Limiter{Limit: rate.Every(time.Minute), Burst: 3}
	k := lim.Key("tenant-42")

	for i := range 4 {
		fmt.Printf("job %d allowed: %v\n", i, k.Allow())
	}
	fmt.Printf("tokens %.0f, limit %.4f/s, burst %d\n", k.Tokens(), k.Limit(), k.Burst())

	_ = k.SetLimit(0) // stop: no refill
	fmt.Println("after SetLimit(0), allowed:", k.Allow(), "limit", k.Limit())

	_ = k.SetLimit(rate.Inf) // no limit
	fmt.Println("after SetLimit(rate.Inf), allowed:", k.AllowN(100))
	// Output:
	// job 0 allowed: true
	// job 1 allowed: true
	// job 2 allowed: true
	// job 3 allowed: false
	// tokens 0, limit 0.0167/s, burst 3
	// after SetLimit(0), allowed: false limit 0
	// after SetLimit(rate.Inf), allowed: true
}
