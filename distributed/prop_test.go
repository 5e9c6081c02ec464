package distributed

import (
	"fmt"

	"github.com/redis/go-redis/v9"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/throttle-go/throttle/internal/schedtest"
)

// The property suite of the schedule (internal/schedtest), run against
// Limiter on a real redis-server: the same random sequences of waits,
// retries, tries, reservations, cancels, deadlines, pauses, windows, bare rejections and settles the root
// package runs against throttle.Limiter in synctest bubbles, and the same
// invariants (never over, nothing inside a pause, windows, FIFO, exact
// refunds, no wedge, deadlines), on the real clock.
//
// Tolerance: 25ms. A turn is computed on Redis's clock when the script
// runs and slept on this process's: between the call the checker sees and
// the script's TIME are a loopback round trip (under 1ms idle; 10ms and
// more under -race, with the test's other goroutines and the server on 2
// cores) and the timer's lateness, and the checker's ideal schedule starts
// from the calls. The sequences run at 20/s (50ms a unit), so a violation
// of a whole unit, early or late, is still twice the tolerance. The ops are
// spaced at least 30ms apart so that their order is the order Redis sees
// (and more than the tolerance, which the checker orders calls by),
// and the script is loaded before each sequence (a first call's NOSCRIPT
// and EVAL would shift every turn after it).
//
// THROTTLE_PROP_REDIS_N sets the sequences per suite (default 1; 4 with
// THROTTLE_LONG=1).
const propRedisTol = 25 * time.Millisecond

// propAttempts: a sequence whose run stalled (schedtest.Log.Stall over
// half the tolerance) runs again on a fresh key, up to this many times;
// a run that stalled every time fails.
const propAttempts = 5

// propRun runs seq against a Limiter of cfg named name on c (before, if
// not nil, right before each run) until a run's process stalled less
// than half the tolerance, and returns that run's log: a stalled run's
// calls and returns may be seen late by more than the checker allows,
// and show nothing either way.
func propRun(t *testing.T, c redis.UniversalClient, name string, cfg schedtest.Config, seq schedtest.Sequence, before func()) schedtest.Log {
	t.Helper()
	var stalls []time.Duration
	for attempt := range propAttempts {
		q := New(c, fmt.Sprintf("%s-%d", name, attempt), cfg.Limits()...)
		q.Timeout = time.Second // a loaded machine is no outage
		q.FailMode = FailClosed // a store error must show
		if err := scheduleScript.Load(t.Context(), c).Err(); err != nil {
			t.Fatal(err)
		}
		if before != nil {
			before()
		}
		lg := schedtest.Run(t, q.For("k"), seq, nil)
		q.Close()
		if lg.Stall <= propRedisTol/2 {
			if attempt > 0 {
				t.Logf("run %d of the sequence: the earlier ones stalled %v", attempt+1, stalls)
			}
			return lg
		}
		stalls = append(stalls, lg.Stall)
	}
	t.Fatalf("every one of %d runs of the sequence stalled more than %v: %v", propAttempts, propRedisTol/2, stalls)
	return schedtest.Log{}
}

// propSlots bounds the Redis property sequences that run at once to two,
// whatever go test's -parallel: more would share the 2 cores the
// tolerance is reckoned for.
var propSlots = make(chan struct{}, 2)

func TestPropRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("real clock and a real redis-server: about 6 s")
	}
	_, c := startRedis(t)
	n := propRedisN(t)
	base := time.Now().UnixNano() % 1e9
	if v := os.Getenv("THROTTLE_PROP_BASE"); v != "" {
		base, _ = strconv.ParseInt(v, 10, 64)
	}
	t.Logf("seeds %d to %d per suite (THROTTLE_PROP_BASE=%d)", base, base+n-1, base)
	spaced := schedtest.Options{Ops: 12, Horizon: time.Second, Step: 10 * time.Millisecond,
		MinGap: 30 * time.Millisecond, GiveUp: 20 * time.Second, Deadlines: true, Cancels: true}
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
		{"classes", with(func(o *schedtest.Options) { o.Retries, o.Classes, o.Reserves = true, true, true })},
		{"pauses", with(func(o *schedtest.Options) { o.Retries, o.Pauses = true, true })},
		{"windows", with(func(o *schedtest.Options) { o.Windows = true })},
		{"rejects", with(func(o *schedtest.Options) { o.Rejects = true })},
		// Tries with feedback only: on the real clock the refund check
		// (sequences without feedback) would flag a try refused a few ms
		// before its ideal turn; never over, pauses, FIFO and at-once
		// answers hold within the tolerance.
		{"tries", with(func(o *schedtest.Options) { o.Tries, o.Pauses = true, true })},
		{"reserves", with(func(o *schedtest.Options) { o.Reserves = true })},
		{"all", with(func(o *schedtest.Options) {
			o.Retries, o.Pauses, o.Windows, o.Rejects, o.Tries, o.Reserves, o.Classes = true, true, true, true, true, true, true
		})},
		// Settled costs: never over counting them, and without feedback
		// exact settle against the ideal schedule.
		{"settles", with(func(o *schedtest.Options) { o.Settles = true })},
		{"settles-all", with(func(o *schedtest.Options) {
			o.Retries, o.Pauses, o.Windows, o.Rejects, o.Reserves, o.Settles = true, true, true, true, true, true
		})},
	}
	cfg := schedtest.Config{Limit: 20, Burst: 4}
	for _, s := range suites {
		for i := range n {
			seed := base + i
			t.Run(fmt.Sprintf("%s/%d", s.name, seed), func(t *testing.T) {
				t.Parallel()
				propSlots <- struct{}{}
				defer func() { <-propSlots }()
				seq := schedtest.Generate(seed, cfg, s.opt)
				lg := propRun(t, c, fmt.Sprintf("prop-%s-%d", s.name, seed), cfg, seq, nil)
				if !schedtest.Check(t, seq, lg, propRedisTol) {
					t.Logf("replay: THROTTLE_PROP_BASE=%d THROTTLE_PROP_REDIS_N=1 go test -run 'TestPropRedis/%s/' ./distributed\n%s",
						seed, s.name, schedtest.Describe(seq, lg))
				}
			})
		}
	}
}
