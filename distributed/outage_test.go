package distributed

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/throttle-go/throttle"
)

// TestScriptFlush: SCRIPT FLUSH mid-run (as after a failover to a node
// that never saw the script) costs one NOSCRIPT and an EVAL; no wait sees
// an error.
func TestScriptFlush(t *testing.T) {
	t.Parallel()
	s, c := startRedis(t)
	q := New(c, "flush", throttle.Limit{Rate: 1000, Burst: 10})
	q.FailMode = FailClosed // any store error would surface
	q.Timeout = time.Second // a loaded machine must not fake an outage
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		waits int
	)
	for range 4 {
		wg.Go(func() {
			for {
				err := q.WaitN(ctx, 1)
				if ctx.Err() != nil || errors.Is(err, throttle.ErrWouldExceedDeadline) {
					return
				}
				if err != nil {
					t.Errorf("WaitN = %v; want nil across SCRIPT FLUSH", err)
					return
				}
				mu.Lock()
				waits++
				mu.Unlock()
			}
		})
	}
	for range 3 {
		time.Sleep(250 * time.Millisecond)
		if reply, err := s.Do("SCRIPT", "FLUSH"); err != nil || reply != "+OK" {
			t.Fatalf("SCRIPT FLUSH = %q, %v", reply, err)
		}
	}
	wg.Wait()
	t.Logf("%d waits across 3 SCRIPT FLUSHes", waits)
	if waits < 500 {
		t.Errorf("%d waits in 1s at 1000/s; want ≥ 500", waits)
	}
}

// result is one wait of an outage run.
type result struct {
	start, end time.Time
	fromRedis  bool // the turn came from Redis
	err        error
}

// TestOutage stops Redis for 2s (3s with THROTTLE_LONG=1) in the middle
// of a run and restarts it on the same port, once per FailMode, checking
// what the mode promises while
// Redis is away, that no wait is held longer than the store timeout (plus
// a margin), and that waits are served by Redis again within 1s of the
// restart (the breaker probes every 250ms).
func TestOutage(t *testing.T) {
	t.Parallel()
	const (
		limit, burst = 100, 10
		workers      = 2 // FailLocal paces this process at 50/s
		// Margin over Timeout for a wait that fails over: the store call
		// is cut at Timeout by its context; what remains is scheduling
		// and, for FailLocal, the local turn, counted separately. 100ms
		// covers a loaded 2-core machine under -race.
		margin = 100 * time.Millisecond
	)
	outage := 2 * time.Second
	if longRun() {
		outage = 3 * time.Second
	}
	for _, mode := range []FailMode{FailOpen, FailClosed, FailLocal} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			s, c := startRedis(t)
			q := New(c, "outage", throttle.Limit{Rate: limit, Burst: burst})
			q.FailMode, q.Workers = mode, workers
			timeout := q.timeout()

			ctx, cancel := context.WithCancel(context.Background())
			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				results []result
			)
			w := q.For("").(*keyWaiter)
			for range 4 {
				wg.Go(func() {
					for ctx.Err() == nil {
						r := result{start: time.Now()}
						turn, err := w.waitN(ctx, 1)
						r.end, r.fromRedis, r.err = time.Now(), turn != 0, err
						if ctx.Err() != nil {
							return
						}
						mu.Lock()
						results = append(results, r)
						mu.Unlock()
						if err != nil || (mode == FailOpen && !r.fromRedis) {
							// Failing over is immediate: pace the loop
							// a little rather than spin a core.
							time.Sleep(time.Millisecond)
						}
					}
				})
			}
			time.Sleep(500 * time.Millisecond)
			s.Stop()
			down := time.Now()
			time.Sleep(outage)
			restart := time.Now() // Redis is down throughout [down, restart)
			s.Restart()
			up := time.Now() // Redis answers PING
			time.Sleep(1500 * time.Millisecond)
			cancel()
			wg.Wait()

			var sent, rejected, other, paidTimeout, leased int
			var firstBack time.Time
			var longest time.Duration
			for _, r := range results {
				during := r.start.After(down) && r.start.Before(restart)
				if during {
					switch {
					case r.err == nil && r.fromRedis && mode != FailLocal:
						// A turn Redis gave before it went down, leased
						// and held by this process (see lease.go): not
						// the fail mode's answer.
						leased++
					case r.err == nil:
						sent++
					case errors.Is(r.err, ErrStoreUnavailable):
						rejected++
					default:
						other++
						t.Errorf("wait during the outage: %v; want nil or ErrStoreUnavailable", r.err)
					}
					d := r.end.Sub(r.start)
					longest = max(longest, d)
					if d >= timeout && mode != FailLocal { // FailLocal waits also sleep their local turn
						paidTimeout++
					}
				}
				if r.start.After(restart) && r.fromRedis && (firstBack.IsZero() || r.end.Before(firstBack)) {
					firstBack = r.end
				}
			}
			t.Logf("%v: during the %v outage %d sent, %d rejected, %d other errors (and %d on turns leased before it); %d waits paid the %v timeout (not counted for FailLocal; the breaker answers the others at once); longest wait %v; Redis serving again %v after restart",
				mode, outage, sent, rejected, other, leased, paidTimeout, timeout, longest.Round(time.Microsecond), firstBack.Sub(up).Round(time.Millisecond))
			if leased > defaultMaxLease {
				t.Errorf("%d waits went on leased turns during the outage; want at most MaxLease (%d), the turns held when it began", leased, defaultMaxLease)
			}

			switch mode {
			case FailOpen:
				if rejected > 0 || sent == 0 {
					t.Errorf("FailOpen: %d sent, %d rejected; want all sent", sent, rejected)
				}
			case FailClosed:
				if sent > 0 || rejected == 0 {
					t.Errorf("FailClosed: %d sent, %d rejected; want all rejected with ErrStoreUnavailable", sent, rejected)
				}
			case FailLocal:
				// rate/workers for the outage plus the local share of the
				// burst; ±10% for the waits that straddle its edges.
				want := float64(limit)/workers*outage.Seconds() + burst/workers
				if got := float64(sent); got < want*0.9 || got > want*1.1 || rejected > 0 {
					t.Errorf("FailLocal: %d sent, %d rejected; want %.0f ±10%% sent, none rejected", sent, rejected, want)
				}
			}
			bound := timeout + margin
			if mode == FailLocal {
				// Plus the local turn: 4 goroutines share 50/s, 20ms apart.
				bound += 4 * time.Second / (limit / workers)
			}
			if longest > bound {
				t.Errorf("longest wait during the outage: %v; want ≤ %v (Timeout %v + margin %v, + the local turn for FailLocal)", longest, bound, timeout, margin)
			}
			if firstBack.IsZero() || firstBack.Sub(up) > time.Second {
				t.Errorf("Redis served again %v after the restart; want within 1s", firstBack.Sub(up))
			}
		})
	}
}
