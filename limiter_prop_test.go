package throttle_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/internal/schedtest"
)

// The model-based property suite of the schedule (schedule.go) against
// Limiter: random sequences of waits, cancels, deadlines, pauses, windows,
// rejections and declared limits, each run in a synctest bubble (exact
// times, tol 2 ns for the schedule's float64 rounding) and checked by
// internal/schedtest.
//
// Environment:
//
//	THROTTLE_PROP_N=20000    sequences per suite (default propDefaultN:
//	                         16 suites × 500 run in about 10 s with -race)
//	THROTTLE_PROP_SEED=1234  replay that one seed (as a failure reports
//	                         it, with the suite to -run), verbosely
//	THROTTLE_PROP_BASE=99    first seed (default: from the clock, logged)
//	THROTTLE_PROP_COUNT=1    count the failing sequences per suite instead
//	                         of stopping at the third
const propDefaultN = 500

// propTol: the schedule keeps times in float64 nanoseconds and rounds
// sleeps up; the checker's ideal schedule rounds too. 2 ns is that and
// no more: every op is at a whole millisecond.
// propWatchdog bounds one sequence's run in real time.
const propWatchdog = 20 * time.Second

const propTol = 2 * time.Nanosecond

var propSuites = []struct {
	name string
	cfg  schedtest.Config
	opt  schedtest.Options
}{
	// Waits only: FIFO, never over, exact refund against the ideal
	// schedule, deadlines.
	{"waits/10per_s/burst1", schedtest.Config{Limit: 10, Burst: 1}, schedtest.Options{Deadlines: true, Cancels: true}},
	{"waits/10per_s/burst4", schedtest.Config{Limit: 10, Burst: 4}, schedtest.Options{Deadlines: true, Cancels: true}},
	{"waits/3per_s/burst2", schedtest.Config{Limit: 3, Burst: 2}, schedtest.Options{Deadlines: true, Cancels: true, Ops: 30, Horizon: 4 * time.Second}},
	{"waits/retries/10per_s/burst3", schedtest.Config{Limit: 10, Burst: 3}, schedtest.Options{Deadlines: true, Cancels: true, Retries: true}},
	{"waits/tries/10per_s/burst3", schedtest.Config{Limit: 10, Burst: 3}, schedtest.Options{Deadlines: true, Cancels: true, Tries: true, Reserves: true}},
	// Priority classes: FIFO within each, never over, no wedge.
	{"classes/10per_s/burst2", schedtest.Config{Limit: 10, Burst: 2}, schedtest.Options{Deadlines: true, Cancels: true, Retries: true, Classes: true, Tries: true, Reserves: true}},
	{"classes/limits/10per_s/burst2+tokens", propTokens(10, 2), schedtest.Options{Deadlines: true, Cancels: true, Retries: true, Classes: true}},
	// One kind of feedback at a time, then everything.
	{"pauses/10per_s/burst3", schedtest.Config{Limit: 10, Burst: 3}, schedtest.Options{Deadlines: true, Cancels: true, Retries: true, Pauses: true}},
	{"windows/20per_s/burst5", schedtest.Config{Limit: 20, Burst: 5}, schedtest.Options{Deadlines: true, Cancels: true, Windows: true}},
	{"rejects/10per_s/burst2", schedtest.Config{Limit: 10, Burst: 2}, schedtest.Options{Deadlines: true, Cancels: true, Rejects: true}},
	{"all/10per_s/burst2", schedtest.Config{Limit: 10, Burst: 2}, propAll},
	{"all/50per_s/burst10", schedtest.Config{Limit: 50, Burst: 10}, propAll},
	{"all/1per_s/burst1", schedtest.Config{Limit: 1, Burst: 1}, propAll},
	// The zero Limiter: no limit, only what servers say.
	{"all/nolimit", schedtest.Config{}, propAll},
	// Costs settled after the fact: never over counting the settled
	// costs; without feedback, exact settle against the ideal schedule.
	{"settles/10per_s/burst5", schedtest.Config{Limit: 10, Burst: 5}, schedtest.Options{Deadlines: true, Cancels: true, Settles: true}},
	{"settles/tries/10per_s/burst3", schedtest.Config{Limit: 10, Burst: 3}, schedtest.Options{Deadlines: true, Cancels: true, Tries: true, Reserves: true, Settles: true}},
	{"settles/all/10per_s/burst2", schedtest.Config{Limit: 10, Burst: 2}, propAllSettles},
	{"settles/all/50per_s/burst10", schedtest.Config{Limit: 50, Burst: 10}, propAllSettles},
	// Several limits per key (Limiter.Limits, Wait of a Cost): never over on
	// each, all or none and exact refund on every limit against the ideal
	// FIFO schedule of all of them.
	{"limits/waits/10per_s/burst2+tokens", propTokens(10, 2), schedtest.Options{Deadlines: true, Cancels: true}},
	{"limits/waits/5per_s/burst3+tokens+bytes", propTokensBytes(5, 3), schedtest.Options{Deadlines: true, Cancels: true}},
	{"limits/waits/nolimit+tokens+bytes", propTokensBytes(0, 0), schedtest.Options{Deadlines: true, Cancels: true, Ops: 30}},
	{"limits/pauses/10per_s/burst3+tokens", propTokens(10, 3), schedtest.Options{Deadlines: true, Cancels: true, Retries: true, Pauses: true}},
	{"limits/all/10per_s/burst2+tokens+bytes", propTokensBytes(10, 2), propAll},
	{"limits/all/nolimit+tokens", propTokens(0, 0), propAll},
	// Windows as configured limits: fixed (aligned to the Unix epoch) and
	// sliding window counters, alone and beside a bucket.
	{"limits/waits/10per_s/burst2+fixed", propWindow(10, 2, false), schedtest.Options{Deadlines: true, Cancels: true}},
	{"limits/waits/10per_s/burst2+sliding", propWindow(10, 2, true), schedtest.Options{Deadlines: true, Cancels: true}},
	{"limits/waits/nolimit+tokens+sliding", propWindowTokens(true), schedtest.Options{Deadlines: true, Cancels: true, Ops: 30}},
	{"limits/all/10per_s/burst3+fixed", propWindow(10, 3, false), propAll},
	{"limits/all/nolimit+tokens+sliding", propWindowTokens(true), propAll},
	// Costs settled in every unit (Quota.Settle of a Cost): never over on each
	// limit counting the settled costs.
	{"limits/settles/10per_s/burst2+tokens+bytes", propTokensBytes(10, 2), schedtest.Options{Deadlines: true, Cancels: true, Settles: true}},
	{"limits/settles/nolimit+tokens+sliding", propWindowTokens(true), schedtest.Options{Deadlines: true, Cancels: true, Settles: true, Ops: 30}},
	{"limits/settles/10per_s/burst3+fixed", propWindow(10, 3, false), schedtest.Options{Deadlines: true, Cancels: true, Settles: true}},
	{"limits/settles/all/10per_s/burst2+tokens+bytes", propTokensBytes(10, 2), propAllSettles},
	{"limits/settles/all/10per_s/burst3+sliding", propWindow(10, 3, true), propAllSettles},
	// Exact sliding logs (SlidingLog): at most q in every interval of
	// length w, over the admitted times.
	{"limits/waits/10per_s/burst2+log", propLog(propWindow(10, 2, false)), schedtest.Options{Deadlines: true, Cancels: true}},
	{"limits/waits/nolimit+tokens+log", propLog(propWindowTokens(false)), schedtest.Options{Deadlines: true, Cancels: true, Ops: 30}},
	{"limits/all/10per_s/burst3+log", propLog(propWindow(10, 3, false)), propAll},
	{"limits/all/nolimit+tokens+log", propLog(propWindowTokens(false)), propAll},
	{"limits/settles/10per_s/burst3+log", propLog(propWindow(10, 3, false)), schedtest.Options{Deadlines: true, Cancels: true, Settles: true}},
	{"limits/settles/all/nolimit+tokens+log", propLog(propWindowTokens(false)), propAllSettles},
	// Fixed windows aligned to first use (FromFirstUse).
	{"limits/waits/10per_s/burst2+first", propFirst(propWindow(10, 2, false)), schedtest.Options{Deadlines: true, Cancels: true}},
	{"limits/waits/nolimit+tokens+first", propFirst(propWindowTokens(false)), schedtest.Options{Deadlines: true, Cancels: true, Ops: 30}},
	{"limits/all/10per_s/burst3+first", propFirst(propWindow(10, 3, false)), propAll},
	{"limits/all/nolimit+tokens+first", propFirst(propWindowTokens(false)), propAll},
	{"limits/settles/10per_s/burst3+first", propFirst(propWindow(10, 3, false)), schedtest.Options{Deadlines: true, Cancels: true, Settles: true}},
	{"limits/settles/all/nolimit+tokens+first", propFirst(propWindowTokens(false)), propAllSettles},
}

// propFirst aligns c's windows to first use.
func propFirst(c schedtest.Config) schedtest.Config {
	for i := range c.Extra {
		if c.Extra[i].Window > 0 {
			c.Extra[i].FirstUse = true
		}
	}
	return c
}

// propLog makes c's windows sliding logs.
func propLog(c schedtest.Config) schedtest.Config {
	for i := range c.Extra {
		if c.Extra[i].Window > 0 {
			c.Extra[i].Log = true
		}
	}
	return c
}

// propWindow is a Config of limit/s, burst, and a window of 8 tokens per
// 500 ms, fixed or sliding.
func propWindow(limit float64, burst int, sliding bool) schedtest.Config {
	return schedtest.Config{Limit: limit, Burst: burst, Extra: []schedtest.ExtraLimit{
		{Unit: "tokens", Burst: 8, Window: 500 * time.Millisecond, Sliding: sliding}}}
}

// propWindowTokens is a Config without a first limit, tokens 50/s burst
// 20, and a window of 6 requests per 300 ms (sliding or fixed).
func propWindowTokens(sliding bool) schedtest.Config {
	c := propTokens(0, 0)
	c.Extra = append(c.Extra, schedtest.ExtraLimit{Unit: "requests", Burst: 6, Window: 300 * time.Millisecond, Sliding: sliding})
	return c
}

// propTokens is a Config of limit/s, burst, and tokens 50/s burst 20.
func propTokens(limit float64, burst int) schedtest.Config {
	return schedtest.Config{Limit: limit, Burst: burst, Extra: []schedtest.ExtraLimit{{Unit: "tokens", Limit: 50, Burst: 20}}}
}

// propTokensBytes adds bytes 7/s burst 4 to propTokens: three limits, of
// which any may bind.
func propTokensBytes(limit float64, burst int) schedtest.Config {
	c := propTokens(limit, burst)
	c.Extra = append(c.Extra, schedtest.ExtraLimit{Unit: "bytes", Limit: 7, Burst: 4})
	return c
}

var propAllSettles = func() schedtest.Options { o := propAll; o.Settles = true; return o }()

var propAll = schedtest.Options{Retries: true, Classes: true, Tries: true, Reserves: true, Deadlines: true, Cancels: true, Pauses: true, Windows: true, Rejects: true, Declares: true}

func propEnv(t *testing.T, name string, def int64) int64 {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, s, err)
	}
	return v
}

// propRun runs seq against a fresh Limiter in a bubble and returns its
// violations and log.
func propRun(t *testing.T, seq schedtest.Sequence) (v []string, lg schedtest.Log) {
	// A waiter that spins (wakes again and again at one instant, or a
	// nanosecond apart) keeps fake time from reaching the sequence's
	// GiveUp: a real-time watchdog names the sequence and stops the test.
	wd := time.AfterFunc(propWatchdog, func() {
		panic(fmt.Sprintf("schedule property: sequence still running after %v of real time (a waiter spins?):\n%s", propWatchdog, seq))
	})
	defer wd.Stop()
	synctest.Test(t, func(t *testing.T) {
		if len(seq.Config.Extra) > 0 {
			// The bubble's clock starts on a whole second: start the run
			// at a phase of windows aligned to the Unix epoch that the
			// seed picks, as a run on the real clock does.
			time.Sleep(time.Duration(uint64(seq.Seed)%1000) * time.Millisecond)
		}
		l := &throttle.Limiter{Limits: seq.Config.Limits()}
		lg = schedtest.Run(t, l.For("k"), seq, synctest.Wait)
		v = schedtest.Violations(seq, lg, propTol)
	})
	return v, lg
}

func TestPropSchedule(t *testing.T) {
	n := propEnv(t, "THROTTLE_PROP_N", propDefaultN)
	base := propEnv(t, "THROTTLE_PROP_BASE", time.Now().UnixNano()%1e9)
	one, replay := int64(0), os.Getenv("THROTTLE_PROP_SEED") != ""
	if replay {
		one, n = propEnv(t, "THROTTLE_PROP_SEED", 0), 1
	} else {
		t.Logf("seeds %d to %d per suite (THROTTLE_PROP_BASE=%d)", base, base+n-1, base)
	}
	count := os.Getenv("THROTTLE_PROP_COUNT") != ""
	var seqs, ops, waits atomic.Int64
	start := time.Now()
	for _, s := range propSuites {
		t.Run(s.name, func(t *testing.T) {
			failed := 0
			kinds := map[string]int{}
			defer func() {
				if count && failed > 0 {
					t.Errorf("%d of %d sequences fail: %v", failed, n, kinds)
				}
			}()
			for i := range n {
				seed := base + i
				if replay {
					seed = one
				}
				seq := schedtest.Generate(seed, s.cfg, s.opt)
				v, lg := propRun(t, seq)
				seqs.Add(1)
				ops.Add(int64(len(seq.Ops)))
				for _, o := range seq.Ops {
					if o.Kind == schedtest.Wait {
						waits.Add(1)
					}
				}
				if replay {
					t.Logf("%s", schedtest.Describe(seq, lg))
				}
				if len(v) == 0 {
					continue
				}
				if count {
					// THROTTLE_PROP_COUNT: how many sequences fail, and how.
					failed++
					kinds[strings.SplitN(v[0], ":", 2)[0]]++
					continue
				}
				min := schedtest.Shrink(seq, func(s schedtest.Sequence) bool {
					v, _ := propRun(t, s)
					return len(v) > 0
				})
				mv, mlg := propRun(t, min)
				if len(mv) == 0 {
					mv = []string{"(none when run again: the violation depends on the order of events at one instant)"}
				}
				t.Errorf("seed %d: %s\nreplay: THROTTLE_PROP_SEED=%d go test -run 'TestPropSchedule/%s$' -v\nshrunk to:\n%s\nviolates:\n\t%s",
					seed, v[0], seed, s.name, schedtest.Describe(min, mlg), strings.Join(mv, "\n\t"))
				if failed++; failed == 3 {
					t.Fatalf("stopping after %d failing sequences", failed)
				}
			}
		})
	}
	t.Logf("%d sequences, %d ops (%d waits) checked in %v", seqs.Load(), ops.Load(), waits.Load(), time.Since(start).Round(time.Millisecond))
}

// TestPropRealClock runs a few sequences against Limiter on the real
// clock, as the distributed package runs them against Redis: spaced ops,
// no idle func, a tolerance for timer slack. It checks the real-clock
// mode of the suite itself (no false violations from scheduling noise);
// the bubble runs above check the Limiter.
//
// Tolerance: 30ms at 10/s (100ms a unit), so a unit early is still more
// than three times it. The checker takes a wait's return for its
// admission; a waiter woken late (this machine has phases with a p99 of
// 14-19ms on loopback round trips, and -race) makes the next admission
// look early by as much. At 20/s with 15ms a CI run failed on a batch
// woken 19ms after its pause ended, the next wait on time.
func TestPropRealClock(t *testing.T) {
	if testing.Short() {
		t.Skip("real clock: a few seconds")
	}
	opt := schedtest.Options{Ops: 12, Horizon: 2 * time.Second, Step: 20 * time.Millisecond,
		MinGap: 40 * time.Millisecond, GiveUp: 20 * time.Second,
		Deadlines: true, Cancels: true, Pauses: true}
	cfg := schedtest.Config{Limit: 10, Burst: 4}
	base := propEnv(t, "THROTTLE_PROP_BASE", time.Now().UnixNano()%1e9)
	for i := range int64(4) {
		t.Run(fmt.Sprint(base+i), func(t *testing.T) {
			t.Parallel()
			seq := schedtest.Generate(base+i, cfg, opt)
			l := &throttle.Limiter{Limits: cfg.Limits()}
			lg := schedtest.Run(t, l.For("k"), seq, nil)
			schedtest.Check(t, seq, lg, 30*time.Millisecond)
		})
	}
}
