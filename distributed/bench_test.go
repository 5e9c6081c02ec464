package distributed

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"
)

// trivialScript is the anchor: the cheapest EVALSHA round trip there is.
var trivialScript = redis.NewScript("return 1")

// BenchmarkWait compares a wait that never sleeps (a huge rate) with a raw
// EVALSHA of a trivial script on the same server and client, in one run:
// the difference is what throttle adds to the round trip it cannot avoid.
func BenchmarkWait(b *testing.B) {
	_, c := startRedis(b)
	ctx := context.Background()

	b.Run("anchor=evalsha-return-1", func(b *testing.B) {
		b.ReportAllocs()
		if err := trivialScript.Load(ctx, c).Err(); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if err := trivialScript.Run(ctx, c, nil).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("wait", func(b *testing.B) {
		b.ReportAllocs()
		w := New(c, "bench", rate.Limit(1e9), 1e6).For("api.example.com")
		if err := w.WaitN(ctx, 1); err != nil { // loads the script
			b.Fatal(err)
		}
		for b.Loop() {
			if err := w.WaitN(ctx, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
}
