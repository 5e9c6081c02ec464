package distributed

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/internal/redistest"
)

// admission is one wait of a failover run.
type admission struct {
	start, end time.Time
	// at is when the wait was admitted: its turn on Redis's clock (the
	// same host's wall clock here) when it came from Redis, else end.
	// Turns, not wake-ups: a goroutine woken late on a loaded machine
	// must not move an admission into the next window.
	at        time.Time
	fromRedis bool // the turn came from Redis (not the fail mode)
	err       error
}

// disruption is one thing done to the Sentinel setup mid-run: from start
// (the command sent) to end (the setup serves again: a new master that
// the sentinels name and that says it is master, a restarted node that
// answers PING).
type disruption struct {
	name       string
	start, end time.Time
	stale      bool // the new master's state may be stale (see TestFailover)
}

// TestFailover runs 8 goroutines waiting on one key at 100/s, burst 10,
// through a go-redis failover client (default options) of a Sentinel
// setup (a master, a replica, three sentinels), and meanwhile does to it
// what operators and outages do: a SENTINEL FAILOVER, a FLUSHALL, and a
// crash of the master that the sentinels answer by promoting the replica
// (with THROTTLE_LONG=1 also a restart of the master, its data lost,
// which TestRestartFleet covers on one node). It checks:
//
//   - every wait is answered (no error: FailLocal), none longer than
//     maxWait;
//   - in every 1-s window (one starting at each admission's turn), the
//     units Redis admitted are at most burst + rate: what the fallback
//     admitted comes on top, and is counted and shown (the bound is burst
//   - rate + what the fallback allowed). A state Redis lost comes back
//     from what this process remembers (its last turn), so a restart or
//     a FLUSHALL gives no fresh burst. A failover is the exception, and
//     has a bound of its own: Redis replicates asynchronously, and the
//     sentinels promote the replica about a second before the client
//     learns it (+switch-master), so the writes the old master took
//     meanwhile are lost and the new master's copy of the state is
//     stale. A stale state is at worst a full bucket (time refilled
//     it): burst more, plus the tickets this process's sleeping waits
//     hold from the old master, at most one per goroutine. Windows
//     within 1s of a failover are held to rate + 2·burst + goroutines;
//   - after each disruption, a 1-s window in which Redis admitted every
//     wait at the configured pace (90% of rate to rate + burst) starts
//     within 2s of its end.
//
// Its figures are logged as a table.
func TestFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("a 15-s run of a Sentinel setup")
	}
	const (
		limit, burst = 100, 10
		goroutines   = 8
		// The longest a wait may take: its place in the queue (8
		// goroutines at 100/s: 80ms) or the local queue's, the
		// reservation cut at Timeout (50ms), a question about a moved
		// turn cut likewise, a state found lost queued again: about
		// 300ms at worst; 500ms leaves room for a loaded 2-core
		// machine under -race and is far from a hang.
		maxWait = 500 * time.Millisecond
		calm    = 3 * time.Second // observed after each disruption
		back    = 2 * time.Second // the pace is back within this
	)
	st := redistest.StartSentinel(t)
	c := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    redistest.SentinelMaster,
		SentinelAddrs: st.SentinelAddrs(),
	})
	t.Cleanup(func() { c.Close() })
	q := New(c, "failover", throttle.Limit{Rate: limit, Burst: burst})
	q.FailMode, q.Workers = FailLocal, 1
	var log eventLog
	q.OnEvent = log.add
	w := q.For("").(*keyWaiter)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range goroutines { // a connection for each goroutine, and the script
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatalf("PING through the failover client: %v", err)
		}
	}

	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		runs []admission
	)
	for range goroutines {
		wg.Go(func() {
			for ctx.Err() == nil {
				a := admission{start: time.Now()}
				turn, err := w.waitN(ctx, 1)
				a.end, a.fromRedis, a.err = time.Now(), turn != 0, err
				a.at = a.end
				if a.fromRedis {
					a.at = time.UnixMicro(turn)
				}
				if ctx.Err() != nil {
					return
				}
				mu.Lock()
				runs = append(runs, a)
				mu.Unlock()
			}
		})
	}

	var ds []disruption
	do := func(name string, stale bool, f func() bool) {
		d := disruption{name: name, start: time.Now(), stale: stale}
		ok := f()
		d.end = time.Now()
		if !ok {
			cancel()
			wg.Wait()
			t.Fatalf("%s: the setup did not come back", name)
		}
		ds = append(ds, d)
		time.Sleep(calm)
	}
	time.Sleep(time.Second)
	do("SENTINEL FAILOVER", true, func() bool {
		old := st.Master()
		msg := st.Failover()
		if msg != "" {
			t.Error(msg)
		}
		ok := msg == ""
		// The old master follows the new one (the sentinels would make
		// it a replica some 10s later by themselves).
		return ok && st.MakeReplica(old, st.Other(old), 10*time.Second)
	})
	if longRun() {
		do("master restart (data lost)", false, func() bool {
			m := st.Master()
			m.Restart()
			return st.WaitReplica(st.Other(m), 10*time.Second)
		})
	}
	do("FLUSHALL", false, func() bool {
		r, err := st.Master().Do("FLUSHALL")
		return err == nil && r == "+OK"
	})
	do("master crash, replica promoted", true, func() bool {
		m := st.Master()
		m.Stop()
		ok := st.WaitMaster(st.Other(m), 15*time.Second)
		m.Restart() // back empty; it follows the new master
		return ok && st.MakeReplica(m, st.Other(m), 10*time.Second)
	})
	cancel()
	wg.Wait()
	q.Close()

	mu.Lock()
	defer mu.Unlock()
	sort.Slice(runs, func(i, j int) bool { return runs[i].at.Before(runs[j].at) })
	var longest time.Duration
	for _, a := range runs {
		if a.err != nil {
			t.Fatalf("a wait at %v failed: %v; want every wait answered (FailLocal)", a.start.Format("15:04:05.000"), a.err)
		}
		longest = max(longest, a.end.Sub(a.start))
	}
	if longest > maxWait {
		t.Errorf("longest wait %v; want ≤ %v", longest, maxWait)
	}

	// window counts the admissions in [from, from+1s): by Redis, by the
	// fail mode.
	window := func(from time.Time) (redisN, localN int) {
		to := from.Add(time.Second)
		i := sort.Search(len(runs), func(i int) bool { return !runs[i].at.Before(from) })
		for ; i < len(runs) && runs[i].at.Before(to); i++ {
			if runs[i].fromRedis {
				redisN++
			} else {
				localN++
			}
		}
		return redisN, localN
	}
	// bound is the most Redis may admit in the 1-s window from t.
	bound := func(t time.Time) int {
		for _, d := range ds {
			if d.stale && t.After(d.start.Add(-time.Second)) && t.Before(d.end.Add(time.Second)) {
				return limit + 2*burst + goroutines
			}
		}
		return limit + burst
	}
	maxRedis, maxTotal, maxLocal := 0, 0, 0
	for _, a := range runs {
		r, l := window(a.at)
		maxRedis, maxTotal, maxLocal = max(maxRedis, r), max(maxTotal, r+l), max(maxLocal, l)
		if b := bound(a.at); r > b {
			t.Errorf("1-s window from %v: Redis admitted %d (and the fallback %d); want Redis ≤ %d", a.at.Format("15:04:05.000"), r, l, b)
		}
	}

	var table strings.Builder
	fmt.Fprintf(&table, "%-32s %12s %8s %9s %12s %16s %10s\n", "disruption", "at", "lasted", "fallback", "longest wait", "max 1-s (Redis)", "pace back")
	for i, d := range ds {
		until := d.end.Add(calm)
		if i+1 < len(ds) {
			until = ds[i+1].start
		}
		fallback, worst, win, winRedis := 0, time.Duration(0), 0, 0
		for _, a := range runs {
			if a.at.Before(d.start) || !a.at.Before(until) {
				continue
			}
			if !a.fromRedis {
				fallback++
			}
			worst = max(worst, a.end.Sub(a.start))
			r, l := window(a.at)
			win, winRedis = max(win, r+l), max(winRedis, r)
		}
		// The first 1-s window from d.end on (starting at d.end or at an
		// admission) in which Redis admitted everything at the pace.
		backAfter := time.Duration(-1)
		starts := []time.Time{d.end}
		for _, a := range runs {
			if a.at.After(d.end) && a.at.Before(until) {
				starts = append(starts, a.at)
			}
		}
		for _, s := range starts {
			if s.Add(time.Second).After(until) {
				break
			}
			r, l := window(s)
			if l == 0 && r >= limit*9/10 && r <= limit+burst {
				backAfter = s.Sub(d.end)
				break
			}
		}
		fmt.Fprintf(&table, "%-32s %12s %8v %9d %12v %16s %10v\n", d.name, d.start.Format("15:04:05.000"), d.end.Sub(d.start).Round(time.Millisecond), fallback, worst.Round(time.Millisecond), fmt.Sprintf("%d (%d)", win, winRedis), backAfter.Round(time.Millisecond))
		if backAfter < 0 || backAfter > back {
			t.Errorf("%s: the configured pace was back %v after it ended; want within %v", d.name, backAfter, back)
		}
	}
	t.Logf("%d waits, longest %v; max 1-s window: %d by Redis (bound %d, %d within 1s of a failover), %d in all, %d by the fallback; events: %d store-error, %d breaker-open, %d breaker-close, %d fallback\n%s",
		len(runs), longest.Round(time.Millisecond), maxRedis, burst+limit, limit+2*burst+goroutines, maxTotal, maxLocal,
		len(log.of(throttle.EventStoreError)), len(log.of(throttle.EventBreakerOpen)), len(log.of(throttle.EventBreakerClose)), len(log.of(throttle.EventFallback)), table.String())
}
