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

// TestPauseFleet: three workers (own clients) share a quota; one pauses it
// for 2s as after a 429 with Retry-After: 2. The server's arrival times
// show that no wait that started after Pause returned was served before
// the pause ended. Bounds:
//
//   - Pause writes now+2s by Redis's clock at some instant after pauseSent,
//     so the pause ends at or after pauseSent+2s (Redis and the test share
//     the machine's clock). A later wait's turn is at or after that end, a
//     Go timer never fires early, so its request arrives after it: the
//     bound is exact, no tolerance.
//   - Waits already sleeping when the pause was written keep their turns.
//     Each goroutine has at most one request in flight and one reservation
//     made before the pause took effect: at most 2 × 12 such arrivals.
//   - Sending resumes within 300ms of the pause's end (the first turns are
//     at the end itself; 300ms is scheduling slack on a loaded machine).
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
	var before, inside, early, firstAfter = 0, 0, 0, time.Time{}
	mu.Lock()
	defer mu.Unlock()
	for _, h := range hits {
		switch {
		case h.at.Before(pauseSent):
			before++
		case h.at.Before(end):
			inside++
			if h.after {
				early++
				t.Errorf("a wait begun after Pause returned arrived at pause+%v (turn pause+%v); want ≥ 2s", h.at.Sub(pauseSent), h.turn.Sub(pauseSent))
			}
		case firstAfter.IsZero() || h.at.Before(firstAfter):
			firstAfter = h.at
		}
	}
	t.Logf("Pause took %v; arrivals: %d before, %d during the 2s pause (reserved earlier), first after it at end+%v",
		pauseDone.Sub(pauseSent), before, inside, firstAfter.Sub(end))
	if inside > 2*workers*goroutines {
		t.Errorf("%d arrivals during the pause; want ≤ %d (per goroutine one in flight, one reserved earlier)", inside, 2*workers*goroutines)
	}
	if firstAfter.IsZero() || firstAfter.Sub(end) > 300*time.Millisecond {
		t.Errorf("first arrival after the pause at end+%v; want within 300ms", firstAfter.Sub(end))
	}
}
