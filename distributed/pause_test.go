package distributed

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/throttle-go/throttle/internal/redistest"
)

func TestPauseNeverShortens(t *testing.T) {
	_, c := startRedis(t)
	q := New(c, "pause-order", 100, 10)
	w := q.For("k").(*keyWaiter)
	ctx := context.Background()
	if err := q.For("k").(*keyWaiter).Pause(ctx, 5*time.Second); err != nil {
		t.Fatalf("Pause(5s) = %v", err)
	}
	_, long, _ := hashState(t, c, w.rkey)
	if err := w.Pause(ctx, time.Second); err != nil {
		t.Fatalf("Pause(1s) = %v", err)
	}
	_, after, pttl := hashState(t, c, w.rkey)
	if after != long {
		t.Errorf("pause end after Pause(1s) = %.0f; want the longer %.0f kept", after, long)
	}
	if pttl < 4*time.Second {
		t.Errorf("PTTL = %v; want the hash kept until the 5s pause ends", pttl)
	}
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := w.WaitN(dctx, 1); err == nil {
		t.Errorf("WaitN with a 2s deadline during a 5s pause = nil; want refused")
	}
}

// TestPauseFleet: three workers (own clients, so own connections and
// subscriptions, as separate processes would have) share a quota, with
// four goroutines each sleeping on reserved turns; one worker pauses it
// for 2s as after a 429 with Retry-After: 2. The server's arrival times
// show that nothing is sent during the pause. Bounds:
//
//   - Pause writes now+2s by Redis's clock at some instant after pauseSent,
//     so the pause ends at or after pauseSent+2s (Redis and the test share
//     the machine's clock). A later wait's turn is at or after that end, a
//     Go timer never fires early, so its request arrives after it: exact,
//     no tolerance.
//   - Waits already sleeping learn of the pause from the message pause.lua
//     publishes, which Redis writes to the subscribers' sockets with the
//     script's reply: it reaches them about when Pause returns. A wait
//     whose turn came just before may still be sending, so arrivals are
//     allowed until pauseDone + pushBound: one loopback round trip (the
//     message, then the HTTP request), with scheduling slack for -race on
//     a loaded 2-core machine. From then until the pause's end: none.
//   - Sending resumes within 300ms of the pause's end (the first moved
//     turns are at the end itself; 300ms is scheduling slack).
func TestPauseFleet(t *testing.T) {
	s, _ := startRedis(t)
	type hit struct {
		at, turn time.Time
		after    bool // the wait began after Pause returned
	}
	var (
		mu   sync.Mutex
		hits []hit
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		turn, _ := strconv.ParseInt(r.URL.Query().Get("turn"), 10, 64)
		mu.Lock()
		hits = append(hits, hit{now, time.UnixMicro(turn), r.URL.Query().Get("after") == "true"})
		mu.Unlock()
	}))
	defer srv.Close()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	defer hc.CloseIdleConnections()

	const workers, goroutines = 3, 4
	var (
		paused    atomic.Bool
		pauser    *keyWaiter
		wg        sync.WaitGroup
		errs      = make(chan error, workers*goroutines)
		ctx, stop = context.WithTimeout(context.Background(), 3500*time.Millisecond)
	)
	defer stop()
	for i := range workers {
		q := New(newClient(t, s.Addr()), "pause-fleet", 100, 10)
		q.Timeout = time.Second // a loaded machine must not turn this into an outage test
		w := q.For("api").(*keyWaiter)
		if i == 0 {
			pauser = w
		}
		for range goroutines {
			wg.Go(func() {
				for ctx.Err() == nil {
					after := paused.Load()
					turn, err := w.waitN(ctx, 1)
					if ctx.Err() != nil || errors.Is(err, throttle.ErrWouldExceedDeadline) {
						return // the test's end
					}
					if err != nil {
						errs <- err
						return
					}
					url := srv.URL + "/?after=" + strconv.FormatBool(after) + "&turn=" + strconv.FormatInt(turn, 10)
					if resp, err := hc.Get(url); err == nil {
						resp.Body.Close()
					}
				}
			})
		}
	}
	time.Sleep(500 * time.Millisecond)
	pauseSent := time.Now()
	if err := pauser.Pause(ctx, 2*time.Second); err != nil {
		t.Fatalf("Pause = %v", err)
	}
	paused.Store(true)
	pauseDone := time.Now()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("WaitN = %v", err)
	}

	end := pauseSent.Add(2 * time.Second)
	quiet := pauseDone.Add(pushBound)
	var before, inside, firstAfter = 0, 0, time.Time{}
	mu.Lock()
	defer mu.Unlock()
	for _, h := range hits {
		switch {
		case h.at.Before(pauseSent):
			before++
		case h.at.Before(end):
			inside++
			if h.after {
				t.Errorf("a wait begun after Pause returned arrived at pause+%v (turn pause+%v); want ≥ 2s", h.at.Sub(pauseSent), h.turn.Sub(pauseSent))
			}
			if !h.at.Before(quiet) {
				t.Errorf("an arrival at pause+%v (turn pause+%v, Pause returned at pause+%v); want none after pause+%v until the end",
					h.at.Sub(pauseSent), h.turn.Sub(pauseSent), pauseDone.Sub(pauseSent), quiet.Sub(pauseSent))
			}
		case firstAfter.IsZero() || h.at.Before(firstAfter):
			firstAfter = h.at
		}
	}
	t.Logf("Pause took %v; arrivals: %d before, %d during the 2s pause (all before Pause returned + %v), first after it at end+%v",
		pauseDone.Sub(pauseSent), before, inside, pushBound, firstAfter.Sub(end))
	if firstAfter.IsZero() || firstAfter.Sub(end) > 300*time.Millisecond {
		t.Errorf("first arrival after the pause at end+%v; want within 300ms", firstAfter.Sub(end))
	}
}

// pushBound is how long after Pause returns a wait that was already
// sleeping may still send: see TestPauseFleet.
const pushBound = 50 * time.Millisecond

// TestPausePushed: waits of one process sleep on reserved turns 100ms
// apart; another process (its own client) pauses the key for 1s, through
// Pause and then through Adapt. Every sleeping turn moves back by the
// pause's length, keeping its spacing, so none comes before the pause's
// end; a wait whose moved turn is past its deadline returns a
// DeadlineError at once and gives its unit back.
func TestPausePushed(t *testing.T) {
	t.Parallel()
	pause := func(w *keyWaiter) error { return w.Pause(context.Background(), time.Second) }
	for _, tc := range []struct {
		name    string
		cluster bool
		pause   func(w *keyWaiter) error
	}{
		{"Pause", false, pause},
		{"Adapt", false, func(w *keyWaiter) error {
			return w.Adapt(context.Background(), throttle.Feedback{Pause: time.Second})
		}},
		{"Cluster", true, pause}, // the key's node is not the channel's: PUBLISH reaches every node
	} {
		t.Run(tc.name, func(t *testing.T) {
			var clients [2]redis.UniversalClient
			if tc.cluster {
				cl := redistest.StartCluster(t)
				for i := range clients {
					cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ContextTimeoutEnabled: true})
					t.Cleanup(func() { cc.Close() })
					clients[i] = cc
				}
			} else {
				s := redistest.Start(t)
				clients[0], clients[1] = newClient(t, s.Addr()), newClient(t, s.Addr())
			}
			c := clients[1]
			sleepers := New(clients[0], "pushed", 10, 1).For("k").(*keyWaiter)
			pauser := New(c, "pushed", 10, 1).For("k").(*keyWaiter)
			sleepers.q.Timeout, pauser.q.Timeout = time.Second, time.Second // cold cluster clients
			if err := sleepers.WaitN(context.Background(), 1); err != nil { // spend the burst
				t.Fatalf("WaitN = %v", err)
			}
			const waits = 4
			turns := make(chan int64, waits)
			errs := make(chan error, waits+1)
			var wg sync.WaitGroup
			for range waits {
				wg.Go(func() {
					turn, err := sleepers.waitN(context.Background(), 1)
					if err != nil {
						errs <- err
					}
					turns <- turn
				})
			}
			dctx, cancel := context.WithTimeout(context.Background(), 900*time.Millisecond)
			defer cancel()
			awaitSleeping(t, sleepers.q, waits)
			deadlined := make(chan time.Duration, 1)
			wg.Go(func() { // after the others: the last turn
				_, err := sleepers.waitN(dctx, 1)
				if !errors.Is(err, throttle.ErrWouldExceedDeadline) {
					errs <- fmt.Errorf("waitN with a deadline = %v; want a DeadlineError", err)
				}
				deadlined <- time.Until(mustDeadline(dctx))
			})
			awaitSleeping(t, sleepers.q, waits+1)
			if err := tc.pause(pauser); err != nil {
				t.Fatalf("pause = %v", err)
			}
			_, end, _ := hashState(t, c, pauser.rkey)
			wg.Wait()
			close(errs)
			close(turns)
			for err := range errs {
				t.Error(err)
			}
			if left := <-deadlined; left < 700*time.Millisecond {
				t.Errorf("the deadlined wait returned %v before its deadline; want at once after the pause (≥ 700ms left)", left)
			}
			var got []int64
			for turn := range turns {
				got = append(got, turn)
			}
			slices.Sort(got)
			for i, turn := range got {
				if float64(turn) < end {
					t.Errorf("turn %d at pause end %+.0fµs; want at or after it", i, float64(turn)-end)
				}
				if i > 0 && turn-got[i-1] < 100000-1 {
					t.Errorf("turns %d and %d %dµs apart; want the 100ms spacing kept", i-1, i, turn-got[i-1])
				}
			}
			t.Logf("turns after the pause's end (µs): %v", func() (d []float64) {
				for _, turn := range got {
					d = append(d, float64(turn)-end)
				}
				return d
			}())
		})
	}
}

func mustDeadline(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// TestPauseFleetProcesses is TestPauseFleet with three worker processes
// (see runFleet), four goroutines each, sleeping on reserved turns; the
// test process pauses the quota for 2s with its own client. The bounds
// are TestPauseFleet's.
func TestPauseFleetProcesses(t *testing.T) {
	s := redistest.Start(t)
	p := &fleetPause{at: 500 * time.Millisecond, d: 2 * time.Second}
	arrivals, _ := runFleet(t, fleet{
		addrs: []string{s.Addr()}, quotas: []string{"pause-procs"},
		limit: 100, burst: 10, procs: 3, goroutines: 4,
		duration: 3500 * time.Millisecond, pause: p,
	})
	end, quiet := p.sent.Add(p.d), p.done.Add(pushBound)
	var before, inside, firstAfter = 0, 0, time.Time{}
	for _, a := range arrivals {
		switch {
		case a.at.Before(p.sent):
			before++
		case a.at.Before(end):
			inside++
			if !a.at.Before(quiet) {
				t.Errorf("worker %d: an arrival at pause+%v (turn pause+%v, Pause returned at pause+%v); want none after pause+%v until the end",
					a.worker, a.at.Sub(p.sent), a.turn.Sub(p.sent), p.done.Sub(p.sent), quiet.Sub(p.sent))
			}
		case firstAfter.IsZero() || a.at.Before(firstAfter):
			firstAfter = a.at
		}
	}
	t.Logf("Pause took %v; arrivals: %d before, %d during the 2s pause (all before Pause returned + %v), first after it at end+%v",
		p.done.Sub(p.sent), before, inside, pushBound, firstAfter.Sub(end))
	if before == 0 {
		t.Errorf("no arrivals before the pause; want the workers sending")
	}
	if firstAfter.IsZero() || firstAfter.Sub(end) > 300*time.Millisecond {
		t.Errorf("first arrival after the pause at end+%v; want within 300ms", firstAfter.Sub(end))
	}
}
