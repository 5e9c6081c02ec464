package distributed

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/throttle-go/throttle/internal/schedtest"
)

// The property suite of the schedule (internal/schedtest), run against
// Quota on a real redis-server: the same random sequences of waits,
// retries, cancels, deadlines, pauses, windows and bare rejections the root
// package runs against Limiter in synctest bubbles, and the same
// invariants (never over, nothing inside a pause, windows, FIFO, exact
// refunds, no wedge, deadlines), on the real clock.
//
// Tolerance: 15ms. A turn is computed on Redis's clock and slept on this
// process's: between them are a loopback round trip (≤ 1ms idle, a few ms
// under -race with other goroutines and the server on 2 cores) and the
// timer's lateness; the sequences run at 20/s (50ms a unit), so 15ms is
// under a third of a unit and no violation of a whole unit can hide in it.
// The ops are spaced at least 20ms apart so that their order is the order
// Redis sees.
//
// THROTTLE_PROP_REDIS_N sets the sequences per suite (default 2).
const propRedisTol = 15 * time.Millisecond

func TestPropRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("real clock and a real redis-server: about 20 s")
	}
	_, c := startRedis(t)
	n := int64(2)
	if v := os.Getenv("THROTTLE_PROP_REDIS_N"); v != "" {
		var err error
		if n, err = strconv.ParseInt(v, 10, 64); err != nil {
			t.Fatalf("THROTTLE_PROP_REDIS_N=%q: %v", v, err)
		}
	}
	base := time.Now().UnixNano() % 1e9
	if v := os.Getenv("THROTTLE_PROP_BASE"); v != "" {
		base, _ = strconv.ParseInt(v, 10, 64)
	}
	t.Logf("seeds %d to %d per suite (THROTTLE_PROP_BASE=%d)", base, base+n-1, base)
	spaced := schedtest.Options{Ops: 12, Horizon: time.Second, Step: 10 * time.Millisecond,
		MinGap: 20 * time.Millisecond, GiveUp: 20 * time.Second, Deadlines: true, Cancels: true}
	with := func(f func(*schedtest.Options)) schedtest.Options {
		o := spaced
		f(&o)
		return o
	}
	suites := []struct {
		name string
		opt  schedtest.Options
	}{
		{"waits", spaced},
		{"retries", with(func(o *schedtest.Options) { o.Retries = true })},
		{"pauses", with(func(o *schedtest.Options) { o.Retries, o.Pauses = true, true })},
		{"windows", with(func(o *schedtest.Options) { o.Windows = true })},
		{"rejects", with(func(o *schedtest.Options) { o.Rejects = true })},
		{"all", with(func(o *schedtest.Options) {
			o.Retries, o.Pauses, o.Windows, o.Rejects = true, true, true, true
		})},
	}
	cfg := schedtest.Config{Limit: 20, Burst: 4}
	for _, s := range suites {
		for i := range n {
			seed := base + i
			t.Run(fmt.Sprintf("%s/%d", s.name, seed), func(t *testing.T) {
				t.Parallel()
				seq := schedtest.Generate(seed, cfg, s.opt)
				q := New(c, fmt.Sprintf("prop-%s-%d", s.name, seed), 20, 4)
				q.Timeout = time.Second // a loaded machine is no outage
				q.FailMode = FailClosed // a store error must show
				defer q.Close()
				lg := schedtest.Run(t, q.For("k"), seq, nil)
				if !schedtest.Check(t, seq, lg, propRedisTol) {
					t.Logf("replay: THROTTLE_PROP_BASE=%d THROTTLE_PROP_REDIS_N=1 go test -run 'TestPropRedis/%s/' ./distributed\n%s",
						seed, s.name, schedtest.Describe(seq, lg))
				}
			})
		}
	}
}
