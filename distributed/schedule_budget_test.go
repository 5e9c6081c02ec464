package distributed

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/internal/measure"
	"github.com/throttle-go/throttle/throttletest"
)

// failEvery is a go-redis hook that fails every n-th call of the schedule
// script's ops wait and lease before it is sent, as a Redis that did not
// answer in time would: the waits it served go to the FailMode. Redis is
// real; only the calls that never reach it are made up, so that the
// fallback happens at known calls whatever the machine's load.
type failEvery struct {
	n     int64
	calls atomic.Int64
	fails atomic.Int64
}

var errInjected = errors.New("injected: redis did not answer")

func (f *failEvery) DialHook(next redis.DialHook) redis.DialHook { return next }
func (f *failEvery) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (f *failEvery) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		a := cmd.Args()
		if len(a) > 4 && (a[0] == "evalsha" || a[0] == "eval") && (a[4] == "wait" || a[4] == "lease") {
			if f.calls.Add(1)%f.n == 0 {
				f.fails.Add(1)
				cmd.SetErr(errInjected)
				return errInjected
			}
		}
		return next(ctx, cmd)
	}
}

// TestHiddenBudgetFleetLiveness: a server with a hidden rolling budget
// (20 requests in any 1 s, a 429 with Retry-After only), four processes
// (four Limiters, each its own client) told 100/s, burst 10, 6 workers each
// through Transport, 240 requests; one process's client fails every 15th
// wait or lease call, whose waits then go by FailLocal. Every request
// must finish, and once the budget is learned (the third refusal), each
// at its position at the learned rate plus a bounded recovery:
//
//   - the learned window is at most the budget's window plus the spread
//     of a burst at the configured pace ((20 − 10)/100/s = 0.1 s) plus a
//     round trip: 1.2 s per 20, the rate the bound uses;
//   - recovery: 3 s, the learned window's probes finding its length
//     (a refused probe costs no pause) and the fallbacks' refusals (a
//     FailLocal wait is paced at the process's share, 25/s, not by the
//     budget: its request may be refused and retried after Retry-After,
//     1 s).
//
// What it guards: a FailLocal wait takes no turn before the last one Redis
// gave its process, which past a learned window is the queue's place at a
// probe a second until the window rolls; that turn must follow Redis's
// moves, or the fallback's waits sleep tens of seconds. And each learned
// window must send all its units (none lost to a spread that starts only
// when a call advances the state, none of the previous window's counted
// in it), or a probe finds room the budget has not freed and the window
// shrinks below the budget's.
func TestHiddenBudgetFleetLiveness(t *testing.T) {
	if testing.Short() {
		t.Skip("a real-clock fleet run: about 15 s")
	}
	rs, _ := startRedis(t)
	const (
		budget, window   = 20, time.Second
		procs, workers   = 4, 6
		each             = 10
		n                = procs * workers * each
		learnedPer       = 1200 * time.Millisecond // per budget units, see above
		recovery         = 3 * time.Second
		unfinishedBefore = 60 * time.Second
	)
	s := throttletest.NewSlidingLog(budget, window)
	var (
		mu     sync.Mutex
		events []struct {
			at time.Time
			ok bool
		}
	)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		s.ServeHTTP(rw, r)
		mu.Lock()
		events = append(events, struct {
			at time.Time
			ok bool
		}{time.Now(), rw.code == http.StatusOK})
		mu.Unlock()
	}))
	defer ts.Close()
	defer ts.Client().CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), unfinishedBefore)
	defer cancel()
	fault := &failEvery{n: 15}
	var (
		wg  sync.WaitGroup
		rmu sync.Mutex
		all measure.Result
	)
	ev := new(measure.Events)
	for p := range procs {
		client := redis.NewClient(&redis.Options{Addr: rs.Addr(), ContextTimeoutEnabled: true})
		if p == 0 {
			client.AddHook(fault)
		}
		defer client.Close()
		q := New(client, "hidden-fleet", throttle.Limit{Rate: 100, Burst: 10})
		q.Workers = procs
		q.Timeout = time.Second // a busy machine is no outage: the faults are the injected ones
		defer q.Close()
		c := &http.Client{Transport: &throttle.Transport{OnEvent: ev.Record, Base: ts.Client().Transport, Waiter: q}}
		wg.Go(func() {
			res := measure.Run(ctx, measure.Load{Client: c, URL: ts.URL, Workers: workers, Requests: workers * each, Worker: strconv.Itoa(p)})
			rmu.Lock()
			defer rmu.Unlock()
			all.Sent += res.Sent
			all.OK += res.OK
			all.GaveUp += res.GaveUp
		})
	}
	start := time.Now()
	wg.Wait()
	wall := time.Since(start)
	st := s.Stats()
	t.Logf("%d of %d requests succeeded, %d gave up, %d refused (%.3f a success) in %v; %d calls failed by FailLocal; events %s",
		all.OK, n, all.GaveUp, st.Rejected, float64(st.Rejected)/float64(max(st.Admitted, 1)), wall.Round(time.Millisecond), fault.fails.Load(), ev)
	if all.OK != n || st.Admitted != n {
		t.Fatalf("%d requests succeeded, %d admitted; want all %d", all.OK, st.Admitted, n)
	}
	if fault.fails.Load() == 0 {
		t.Fatal("no call failed: the fallback was not exercised")
	}
	mu.Lock()
	defer mu.Unlock()
	slices.SortFunc(events, func(a, b struct {
		at time.Time
		ok bool
	}) int {
		return a.at.Compare(b.at)
	})
	// Learned at the third refusal; the admissions after it each by its
	// position at the learned rate, plus the recovery.
	refused, k := 0, 0
	var learned time.Time
	for _, e := range events {
		if !e.ok {
			if refused++; refused == 3 {
				learned = e.at
			}
			continue
		}
		if learned.IsZero() {
			continue
		}
		bound := learned.Add(time.Duration(k/budget)*learnedPer + recovery)
		if e.at.After(bound) {
			t.Errorf("admission %d after the budget was learned came %v after it; want by %v (its position at %d per %v, and %v)",
				k, e.at.Sub(learned).Round(time.Millisecond), bound.Sub(learned), budget, learnedPer, recovery)
			break
		}
		k++
	}
	if learned.IsZero() {
		t.Errorf("%d refusals; want the three that learn the budget", refused)
	}
}

// statusWriter records a response's status.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}
