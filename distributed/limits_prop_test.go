package distributed

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/throttle-go/throttle/internal/schedtest"
)

// TestPropRedisLimits runs the property suite's sequences of several
// limits per key (Config.Extra, waits with costs in each)
// against a Limiter of those limits on a real redis-server, as TestPropRedis runs the
// one-bucket ones: never over on each limit, all or none and exact
// refund against the ideal FIFO schedule of every limit, FIFO, pauses,
// no wedge. The further limits run at the quota's scale (50 ms a unit,
// twice the tolerance), so that one unit early or late shows.
//
// THROTTLE_PROP_REDIS_N sets the sequences per suite (default 1; 4 with
// THROTTLE_LONG=1).
func TestPropRedisLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("real clock and a real redis-server: about 12 s")
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
	all := with(func(o *schedtest.Options) {
		o.Retries, o.Pauses, o.Windows, o.Rejects, o.Tries, o.Reserves = true, true, true, true, true, true
	})
	buckets := schedtest.Config{Limit: 20, Burst: 4, Extra: []schedtest.ExtraLimit{
		{Unit: "tokens", Limit: 20, Burst: 6},
		{Unit: "bytes", Limit: 10, Burst: 3},
	}}
	// Windows of 5 requests per 400 ms beside tokens: fixed (aligned to
	// the Unix epoch, on Redis's clock) and sliding.
	windows := func(sliding bool) schedtest.Config {
		return schedtest.Config{Limit: 20, Burst: 4, Extra: []schedtest.ExtraLimit{
			{Unit: "tokens", Limit: 20, Burst: 6},
			{Unit: "requests", Burst: 5, Window: 400 * time.Millisecond, Sliding: sliding},
		}}
	}
	// An exact sliding log of 5 requests per 400 ms beside tokens.
	logs := windows(false)
	logs.Extra[1].Log = true
	// A window of 5 requests per 400 ms aligned to first use.
	firsts := windows(false)
	firsts.Extra[1].FirstUse = true
	suites := []struct {
		name string
		cfg  schedtest.Config
		opt  schedtest.Options
	}{
		{"limits-waits", buckets, spaced},
		{"limits-pauses", buckets, with(func(o *schedtest.Options) { o.Retries, o.Pauses = true, true })},
		{"limits-classes", buckets, with(func(o *schedtest.Options) { o.Retries, o.Classes = true, true })},
		{"limits-all", buckets, all},
		{"limits-fixed", windows(false), spaced},
		{"limits-sliding", windows(true), spaced},
		{"limits-sliding-all", windows(true), all},
		{"limits-log", logs, spaced},
		{"limits-log-all", logs, all},
		{"limits-first", firsts, spaced},
		{"limits-first-all", firsts, all},
		// Costs settled in every unit (op msettle).
		{"limits-settles", buckets, with(func(o *schedtest.Options) { o.Settles = true })},
		{"limits-settles-fixed", windows(false), with(func(o *schedtest.Options) { o.Settles = true })},
		{"limits-settles-log", logs, with(func(o *schedtest.Options) { o.Settles = true })},
		{"limits-settles-first", firsts, with(func(o *schedtest.Options) { o.Settles = true })},
		{"limits-settles-all", windows(true), with(func(o *schedtest.Options) {
			o.Retries, o.Pauses, o.Windows, o.Rejects, o.Reserves, o.Settles = true, true, true, true, true, true
		})},
	}
	for _, s := range suites {
		for i := range n {
			seed := base + i
			t.Run(fmt.Sprintf("%s/%d", s.name, seed), func(t *testing.T) {
				t.Parallel()
				propSlots <- struct{}{}
				defer func() { <-propSlots }()
				seq := schedtest.Generate(seed, s.cfg, s.opt)
				lg := propRun(t, c, fmt.Sprintf("prop-%s-%d", s.name, seed), s.cfg, seq, func() {
					// Start at the phase of the windows the seed picks, so
					// that a replay of the seed meets the windows as the
					// run did.
					const per = 400 * time.Millisecond
					phase := time.Duration(seed%40) * 10 * time.Millisecond
					time.Sleep((phase - time.Duration(time.Now().UnixNano())%per + per) % per)
				})
				if !schedtest.Check(t, seq, lg, propRedisTol) {
					t.Logf("replay: THROTTLE_PROP_BASE=%d THROTTLE_PROP_REDIS_N=1 go test -run 'TestPropRedisLimits/%s/' ./distributed\n%s",
						seed, s.name, schedtest.Describe(seq, lg))
				}
			})
		}
	}
}
