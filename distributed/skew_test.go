package distributed

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttle-go/throttle"
)

// TestClockSkew runs three workers whose clocks are minutes apart (the
// clock each uses for its own bookkeeping) on one quota. The decision uses
// Redis's TIME and returns a relative wait, so the shared quota stays
// exact: the deadline-bounded run grants burst + rate·duration turns.
func TestClockSkew(t *testing.T) {
	t.Parallel()
	s, _ := startRedis(t)
	const limit, burst = 50, 5
	const duration = 2 * time.Second
	offsets := []time.Duration{-3 * time.Minute, 0, 7 * time.Minute}

	var (
		mu      sync.Mutex
		turns   []time.Time
		wg      sync.WaitGroup
		clients = make([]*redis.Client, len(offsets))
	)
	for i := range offsets { // connected before the clock starts
		clients[i] = newClient(t, s.Addr())
		if err := clients[i].Ping(context.Background()).Err(); err != nil {
			t.Fatalf("PING: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), duration)
	defer cancel()
	deadline, _ := ctx.Deadline()
	for i, off := range offsets {
		q := New(clients[i], "skew", throttle.Limit{Rate: limit, Burst: burst})
		q.now = func() time.Time { return time.Now().Add(off) }
		q.Timeout = time.Second // accuracy, not outages, on a loaded machine
		w := q.For("").(*keyWaiter)
		for range 4 {
			wg.Go(func() {
				for {
					turn, err := w.waitN(ctx, 1)
					if errors.Is(err, throttle.ErrWouldExceedDeadline) || ctx.Err() != nil {
						return
					}
					if err != nil {
						t.Errorf("WaitN (clock %+v) = %v", off, err)
						return
					}
					mu.Lock()
					turns = append(turns, time.UnixMicro(turn))
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	most, first := maxWindow(turns) // sorts turns
	// The bucket starts full at the first turn and refills until the
	// deadline; ±1 for where the last turn falls against the deadline.
	want := burst + limit*deadline.Sub(first).Seconds()
	t.Logf("clocks %v: %d turns from start+%v to the deadline, want %.1f; max 1s window %d",
		offsets, len(turns), first.Sub(deadline.Add(-duration)), want, most)
	if got := float64(len(turns)); math.Abs(got-want) > 1 {
		t.Errorf("%d turns; want %.1f ±1", len(turns), want)
	}
	if most > burst+limit {
		t.Errorf("max 1s window %d turns; want ≤ %d", most, burst+limit)
	}
}
