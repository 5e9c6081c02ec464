package distributed

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/internal/redistest"
)

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
		q := New(newClient(t, s.Addr()), "pause-fleet", throttle.Limit{Rate: 100, Burst: 10})
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
