package distributed

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/internal/redistest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" || os.Getenv(restartEnv) != "" || os.Getenv(inflightEnv) != "" {
		// A child of TestProcesses*: run only the helper, no leak check
		// (it exits from inside the test).
		os.Exit(m.Run())
	}
	// go-redis logs each failed dial; the outage tests cause thousands.
	redis.SetLogger(discardLogger{})
	code := m.Run()
	if code == 0 {
		// A Limiter's subscription to pushed moves outlives its last
		// sleeping wait by pushLinger, by design; anything older is a leak.
		time.Sleep(pushLinger + pushRetry)
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// longRun reports whether THROTTLE_LONG=1 asks for the long runs: the
// soaks and sweeps whose default run is a shorter, representative part of
// them, held to the same bounds (fewer seeds, a shorter run, fewer
// disruptions).
func longRun() bool { return os.Getenv("THROTTLE_LONG") == "1" }

// propRedisN returns the sequences per suite of the Redis property
// suites: THROTTLE_PROP_REDIS_N, else 4 with THROTTLE_LONG=1, else 1.
func propRedisN(tb testing.TB) int64 {
	tb.Helper()
	if v := os.Getenv("THROTTLE_PROP_REDIS_N"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			tb.Fatalf("THROTTLE_PROP_REDIS_N=%q: %v", v, err)
		}
		return n
	}
	if longRun() {
		return 4
	}
	return 1
}

type discardLogger struct{}

func (discardLogger) Printf(context.Context, string, ...any) {}

// newClient returns a client of the server at addr that honours context
// deadlines (so Limiter.Timeout bounds each call), closed at cleanup.
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

// hashState reads a key's state: its theoretical arrival time t and its
// hold (pause) p, in µs of Redis's clock (0 when absent), and the key's
// PTTL.
func hashState(tb testing.TB, c redis.UniversalClient, rkey string) (t, p float64, pttl time.Duration) {
	tb.Helper()
	ctx := context.Background()
	r, err := coreScript.Run(ctx, c, []string{rkey}).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		tb.Fatalf("reading the state of %q: %v", rkey, err)
	}
	if v, ok := r.([]any); ok && len(v) == 2 {
		var tv, pv float64
		fmt.Sscan(v[0].(string), &tv)
		fmt.Sscan(v[1].(string), &pv)
		t, p = max(tv, 0), pv
	}
	pttl, err = c.PTTL(ctx, rkey).Result()
	if err != nil {
		tb.Fatalf("PTTL %q: %v", rkey, err)
	}
	return t, p, pttl
}

// coreScript returns the core's tat and hold as strings (every digit), or
// nil when the key has no state.
var coreScript = redis.NewScript(`
local c = redis.call('HGET', KEYS[1], 'c')
if not c then return nil end
local v
if string.byte(c, 1) <= 4 then -- tags 1 to 4: id, tat and hold first
	v = {struct.unpack('<Bddd', c)}
else
	v = cmsgpack.unpack(c)
	table.insert(v, 1, 0)
end
return {string.format('%.17g', v[3]), string.format('%.17g', v[4])}
`)

// reached runs start, which begins a wait on the key rkey in another
// goroutine, and returns once the key's hash differs from what it was
// before: the wait has reached Redis and taken its place there, so what
// the test does next comes after it (Redis runs one script at a time). It
// fails the test if the hash is unchanged after 5 s.
func reached(tb testing.TB, c redis.UniversalClient, rkey string, start func()) {
	tb.Helper()
	ctx := context.Background()
	before, err := c.HGetAll(ctx, rkey).Result()
	if err != nil {
		tb.Fatalf("HGETALL %q: %v", rkey, err)
	}
	start()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		now, err := c.HGetAll(ctx, rkey).Result()
		if err == nil && !maps.Equal(before, now) {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("the state of %q unchanged 5 s after a wait began (%v): the wait never reached Redis", rkey, err)
		}
	}
}

// awaitQueued polls w's state until n units are queued: the waits begun
// in other goroutines have their tickets. It fails the test after 5 s.
func awaitQueued(tb testing.TB, w throttle.Quota, n int64) {
	tb.Helper()
	var st throttle.State
	var err error
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if st, err = w.State(context.Background()); err == nil && st.Queued >= n {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("State = %+v, %v 5 s after %d units began to wait; want them queued", st, err, n)
		}
	}
}

// awaitSleeping polls q until n of its waits sleep on their turns and
// its subscription to pushed moves is up: a move pushed from then on
// reaches them. It fails the test after 5 s.
func awaitSleeping(tb testing.TB, q *Limiter, n int) {
	tb.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		_, sub := q.pushes.mark()
		if sleeping(q) >= n && sub.up {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%d waits sleeping, subscription up %v 5 s on; want %d sleeping, subscribed", sleeping(q), sub.up, n)
		}
	}
}

// sleeping returns how many of q's waits sleep on their turns.
func sleeping(q *Limiter) int {
	q.pushes.mu.Lock()
	defer q.pushes.mu.Unlock()
	return len(q.pushes.sleepers)
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
