package distributed

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/throttle-go/throttle"
	"golang.org/x/time/rate"
)

// TestLeaseGivenBack: tickets a process leased and did not use go back
// when no wait of the key is in progress for leaseIdle (the timer), at
// Close, and when the last wait of the key ends by its context: the key's
// queue in Redis is empty then, and another process's next wait is not
// behind them. At 10/s the 49 tickets held reach 4.9 s ahead: one left
// behind would put the other wait's turn 100ms later per position, so the
// bound on it (one interval, on Redis's clock) is exact.
func TestLeaseGivenBack(t *testing.T) {
	for _, how := range []string{"idle", "close", "ctx"} {
		t.Run(how, func(t *testing.T) {
			s, c := startRedis(t)
			const limit, burst = 10, 1
			q := New(newClient(t, s.Addr()), "lease-back", throttle.Limit{Rate: limit, Burst: burst})
			q.Timeout = time.Second
			defer q.Close()
			w := q.For("k").(*keyWaiter)
			n := leaseAheadOf(t, q, w)
			other := New(c, "lease-back", throttle.Limit{Rate: limit, Burst: burst})
			defer other.Close()
			ow := other.For("k").(*keyWaiter)
			st, err := ow.State(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			queued := st.Queued
			switch how {
			case "idle":
				for i := 0; held(q, w.rkey) > 0; i++ {
					if i == 200 { // 2 s: the timer's 100ms, and a busy machine
						t.Fatalf("%d tickets still held 2 s after the last wait; want none after leaseIdle", held(q, w.rkey))
					}
					time.Sleep(10 * time.Millisecond)
				}
				q.refunds.Wait() // the timer's call
			case "close":
				q.Close()
			case "ctx":
				// The first ticket went at the lease (its turn had come):
				// a wait may take it at once. The next is 100ms ahead.
				for i := 0; ; i++ {
					ctx, cancel := context.WithCancel(context.Background())
					time.AfterFunc(10*time.Millisecond, cancel)
					err := w.WaitN(ctx, 1)
					cancel()
					if err == nil && i == 0 {
						continue
					}
					if !errors.Is(err, context.Canceled) {
						t.Fatalf("WaitN on a ticket 100ms ahead, cancelled at 10ms = %v; want context.Canceled", err)
					}
					break
				}
				q.refunds.Wait() // its refund and the give-back
			}
			st, err = ow.State(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d tickets leased ahead, %d units queued in Redis; after %s: %d held, %d queued", n, queued, how, held(q, w.rkey), st.Queued)
			if queued < int64(n)-1 {
				t.Errorf("%d units queued in Redis for %d leased; want them queued (the first may have gone)", queued, n)
			}
			if st.Queued != 0 || held(q, w.rkey) != 0 {
				t.Errorf("after %s: %d units queued in Redis, %d held; want 0 and 0 (the unused tickets given back)", how, st.Queued, held(q, w.rkey))
			}
			before := redisNow(t, c)
			turn, err := ow.waitN(context.Background(), 1)
			if err != nil {
				t.Fatal(err)
			}
			if d := float64(turn) - before; d > 100e3 {
				t.Errorf("another process's next wait had its turn %.1fms later; want ≤ 100ms (one interval: nothing left ahead of it)", d/1e3)
			}
		})
	}
}

// TestLeaseSpentGivenBack: leased turns that passed unused (dropped past
// their margin: their units went in Redis at their turns) are not lost to
// the fleet: the key's next lease call gives them back before it takes
// its tickets, and the script settles them to no cost (the bucket's
// units back, to its burst and no further) while nothing is queued and
// no pause holds; under a pause they stay spent (giving them back would
// move the queued turns). At Close they go back with the turns not yet
// due (holes), in one call. At 1/s the bucket refills one unit a second:
// a lost turn shows as a unit missing.
func TestLeaseSpentGivenBack(t *testing.T) {
	ctx := context.Background()
	setup := func(t *testing.T, burst int) (*Limiter, *keyWaiter, *leaseBox) {
		s, _ := startRedis(t)
		q := New(newClient(t, s.Addr()), "lease-spent", throttle.Limit{Rate: 1, Burst: burst})
		q.Timeout = time.Second
		t.Cleanup(func() { q.Close() })
		w := q.For("k").(*keyWaiter)
		return q, w, q.leases.box(w)
	}
	// lease makes the box's lease call for n waits queued (no rate: no
	// ticket for waits expected), and leaves the tickets held.
	lease := func(b *leaseBox, n int) {
		b.mu.Lock()
		defer b.mu.Unlock()
		for range n {
			b.queue = append(b.queue, &leaseWait{ch: make(chan leaseGrant, 1)})
		}
		b.lease(ctx)
		b.queue = nil
	}
	// expire drops the held tickets whose margin has passed at now+d.
	expire := func(b *leaseBox, d time.Duration) (dropped, left int) {
		b.mu.Lock()
		defer b.mu.Unlock()
		if g, ok := b.next("k", time.Time{}, time.Now().Add(d)); ok && g.err == nil {
			b.putBack(g.t)
		}
		return len(b.back), len(b.tickets)
	}
	tokens := func(t *testing.T, w *keyWaiter) float64 {
		t.Helper()
		st, err := w.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.Tokens
	}
	t.Run("next-lease", func(t *testing.T) {
		_, w, b := setup(t, 50)
		lease(b, 10) // due at once: 40 units left
		if got := tokens(t, w); got < 40 || got > 40.5 {
			t.Fatalf("after a lease of 10 on a full bucket of 50: %.3f tokens; want 40", got)
		}
		if dropped, left := expire(b, time.Second); dropped != 10 || left != 0 {
			t.Fatalf("a second past their turns: %d tickets dropped, %d held; want 10 and 0", dropped, left)
		}
		lease(b, 1) // gives the 10 back, then takes 1
		got := tokens(t, w)
		t.Logf("tokens after the next lease of 1: %.3f", got)
		if got < 49 || got > 49.5 {
			t.Errorf("after the 10 unused turns went back in a lease of 1: %.3f tokens; want 49 (39: the unused turns were lost)", got)
		}
		b.mu.Lock()
		back := len(b.back)
		b.mu.Unlock()
		if back != 0 {
			t.Errorf("%d tickets still to give back after the lease call; want 0 (given back once)", back)
		}
	})
	// A lease call that takes nothing (no wait queued, no rate) still
	// gives the unused turns back, and writes the state whole.
	t.Run("nothing-taken", func(t *testing.T) {
		q, w, b := setup(t, 50)
		lease(b, 10)
		expire(b, time.Second)
		tat0, _, _ := hashState(t, q.client, w.rkey)
		lease(b, 0)
		if got := tokens(t, w); got < 50 || got > 50.5 {
			t.Errorf("after the 10 unused turns went back in a lease that took none: %.3f tokens; want 50", got)
		}
		if tat1, _, _ := hashState(t, q.client, w.rkey); tat1 > tat0 || tat1 < tat0-10e6 {
			t.Errorf("tat %.0f after the give-back, %.0f before; want at most 10 units (10 s) earlier", tat1, tat0)
		}
	})
	t.Run("paused", func(t *testing.T) {
		q, w, b := setup(t, 50)
		lease(b, 10)
		expire(b, time.Second)
		if err := w.Pause(ctx, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		tat0, _, _ := hashState(t, q.client, w.rkey)
		lease(b, 1) // a ticket at the pause's end: queued, the 10 stay spent
		tat1, _, _ := hashState(t, q.client, w.rkey)
		if tat1 != tat0 {
			t.Errorf("bucket's tat moved by %.0fµs when the spent turns were given back during a pause; want unchanged (spent: no queued turn moves)", tat1-tat0)
		}
		if n := held(q, w.rkey); n != 1 {
			t.Errorf("%d tickets held; want the 1 at the pause's end", n)
		}
	})
	t.Run("close", func(t *testing.T) {
		q, w, b := setup(t, 5)
		lease(b, 8) // 5 due at once, 3 queued a second apart
		dropped, left := expire(b, 500*time.Millisecond)
		if dropped != 5 || left != 3 {
			t.Fatalf("half a second on: %d tickets dropped, %d held; want 5 and 3", dropped, left)
		}
		q.Close() // the 3 queued back (holes), then the 5 spent settled
		got := tokens(t, w)
		if got < 5-1e-9 {
			t.Errorf("after Close gave back 3 queued and 5 spent turns: %.3f tokens; want 5, the burst (0: the spent turns lost)", got)
		}
	})
}

// TestLeaseKeptAfterMove: a pause pushed while a process holds leased
// turns moves them later; asked again, each is kept until leaseKeep past
// its new turn, not its old one: a wait that comes after the old turns
// (and their leaseKeep) takes the next held ticket, and none is dropped.
// At 100/s the held turns were 10ms apart; a wait sleeping on one (to the
// pause's end) keeps the box from going idle meanwhile.
func TestLeaseKeptAfterMove(t *testing.T) {
	t.Parallel()
	s, _ := startRedis(t)
	q := New(newClient(t, s.Addr()), "lease-moved", throttle.Limit{Rate: rate.Limit(100), Burst: 1})
	q.Timeout = time.Second
	defer q.Close()
	w := q.For("k").(*keyWaiter)
	ctx := context.Background()
	for i := 0; !subscribed(q); i++ { // the push must reach the box
		if i == 50 {
			t.Fatal("the subscription to pushed moves did not come up in 50 waits")
		}
		if err := w.WaitN(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}
	leaseAheadOf(t, q, w)
	if err := w.WaitN(ctx, 1); err != nil { // the first: due at the lease
		t.Fatal(err)
	}
	other := New(newClient(t, s.Addr()), "lease-moved", throttle.Limit{Rate: rate.Limit(100), Burst: 1})
	defer other.Close()
	if err := other.For("k").(*keyWaiter).Pause(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	asleep := make(chan error, 1)
	go func() { asleep <- w.WaitN(sctx, 1) }() // asks the turns again, takes the next
	for i := 0; held(q, w.rkey) == 0 || leaseStatsOf(q).waits < 2; i++ {
		if i == 1000 {
			t.Fatal("the sleeping wait did not take a ticket in 1 s")
		}
		time.Sleep(time.Millisecond)
	}
	// Past the held turns' old times (10ms apart from the lease) and
	// leaseKeep after.
	time.Sleep(50*time.Millisecond + leaseKeep)
	n := held(q, w.rkey)
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := w.WaitN(wctx, 1); err != nil {
		t.Fatal(err)
	}
	st := leaseStatsOf(q)
	t.Logf("%d held before the wait, %d after; %+v", n, held(q, w.rkey), st)
	if st.expired != 0 {
		t.Errorf("%d leased tickets dropped unused; want 0 (their turns moved past the pause: kept leaseKeep past the new turns)", st.expired)
	}
	if got := held(q, w.rkey); got != n-1 {
		t.Errorf("%d tickets held after the wait; want %d (it took the next one)", got, n-1)
	}
	stop()
	if err := <-asleep; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("the sleeping wait = %v; want nil or context.Canceled", err)
	}
}
