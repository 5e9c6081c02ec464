package distributed

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttle-go/throttle/internal/redistest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" || os.Getenv(restartEnv) != "" {
		// A child of TestProcesses*: run only the helper, no leak check
		// (it exits from inside the test).
		os.Exit(m.Run())
	}
	// go-redis logs each failed dial; the outage tests cause thousands.
	redis.SetLogger(discardLogger{})
	code := m.Run()
	if code == 0 {
		// A Quota's subscription to pushed moves outlives its last
		// sleeping wait by pushLinger, by design; anything older is a leak.
		time.Sleep(pushLinger + pushRetry)
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

type discardLogger struct{}

func (discardLogger) Printf(context.Context, string, ...any) {}

// newClient returns a client of the server at addr that honours context
// deadlines (so Quota.Timeout bounds each call), closed at cleanup.
func newClient(tb testing.TB, addr string) *redis.Client {
	tb.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	tb.Cleanup(func() { c.Close() })
	return c
}

// startRedis starts a redis-server and returns a client of it.
func startRedis(tb testing.TB) (*redistest.Server, *redis.Client) {
	tb.Helper()
	s := redistest.Start(tb)
	return s, newClient(tb, s.Addr())
}

// hashState reads a bucket's hash: its theoretical arrival time t and its
// pause p, in µs of Redis's clock (0 when absent), and the key's PTTL.
func hashState(tb testing.TB, c redis.UniversalClient, rkey string) (t, p float64, pttl time.Duration) {
	tb.Helper()
	ctx := context.Background()
	vals, err := c.HMGet(ctx, rkey, "t", "p").Result()
	if err != nil {
		tb.Fatalf("HMGET %q: %v", rkey, err)
	}
	num := func(v any) float64 {
		s, _ := v.(string)
		if s == "" {
			return 0
		}
		var f float64
		if _, err := fmt.Sscan(s, &f); err != nil {
			tb.Fatalf("hash field %q of %q is not a number: %v", s, rkey, err)
		}
		return f
	}
	pttl, err = c.PTTL(ctx, rkey).Result()
	if err != nil {
		tb.Fatalf("PTTL %q: %v", rkey, err)
	}
	return num(vals[0]), num(vals[1]), pttl
}

// redisNow returns Redis's clock in µs.
func redisNow(tb testing.TB, c redis.UniversalClient) float64 {
	tb.Helper()
	now, err := c.Time(context.Background()).Result()
	if err != nil {
		tb.Fatalf("TIME: %v", err)
	}
	return float64(now.UnixMicro())
}
