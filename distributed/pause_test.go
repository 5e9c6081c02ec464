package distributed

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/internal/redistest"
)

func TestPauseNeverShortens(t *testing.T) {
	_, c := startRedis(t)
	q := New(c, "pause-order", throttle.Limit{Rate: 100, Burst: 10})
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

// TestPausePushed: waits of one process sleep on reserved turns 100ms
// apart; another process (its own client) pauses the key for 1s, through
// Pause and then through Observe. Every sleeping turn moves back by the
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
		{"Observe", false, func(w *keyWaiter) error {
			_, err := w.Observe(context.Background(), throttle.Feedback{Pause: time.Second})
			return err
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
			sleepers := New(clients[0], "pushed", throttle.Limit{Rate: 10, Burst: 1}).For("k").(*keyWaiter)
			pauser := New(c, "pushed", throttle.Limit{Rate: 10, Burst: 1}).For("k").(*keyWaiter)
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

// TestPauseExtendedHoldsQueue: 10/s burst 2, the bucket emptied, a
// pause, six waits queued behind it, and an extension of the pause while
// they wait: nothing goes before the extended pause's end, and then at
// most the burst at once and the pace (any three turns ≥ 100ms apart).
func TestPauseExtendedHoldsQueue(t *testing.T) {
	t.Parallel()
	_, c := startRedis(t)
	q := New(c, "pause-extended", throttle.Limit{Rate: 10, Burst: 2})
	q.Timeout = time.Second
	defer q.Close()
	w := q.For("k").(*keyWaiter)
	ctx := context.Background()
	for range 2 { // empty the bucket
		if _, err := w.waitN(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Pause(ctx, 400*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	var waits []func() (int64, error)
	for range 6 {
		waits = append(waits, startWait(t, ctx, w, 1))
	}
	before := redisNow(t, c)
	if err := w.Pause(ctx, 500*time.Millisecond); err != nil { // extends it
		t.Fatal(err)
	}
	end := before + 500e3 // the extended pause ends no earlier
	var turns []int64
	for _, f := range waits {
		turn, err := f()
		if err != nil {
			t.Fatal(err)
		}
		turns = append(turns, turn)
	}
	slices.Sort(turns)
	t.Logf("turns from the pause's end (ms): %v", relMs(turns, end))
	for i, turn := range turns {
		if float64(turn) < end {
			t.Errorf("turn %d came %.1fms before the pause's end", i, (end-float64(turn))/1e3)
		}
		if i >= 2 { // burst 2: three turns span at least one interval
			if d := turn - turns[i-2]; d < 100e3-2 {
				t.Errorf("turns %d and %d are %dµs apart; want ≥ 100000 (3 units with burst 2 at 10/s)", i-2, i, d)
			}
		}
	}
}

// TestPauseExtendedAtItsEnd: 10/s, burst 10, the bucket full; a pause of
// 600ms, k waits queued in it (k ≤ burst: all due exactly at its end, the
// bucket not in debt), the pause extended to 1.5 s from then, and 10 more
// waits queued in the extension. The k + 10 units find a full bucket at
// the extended end: 10 go then, the rest one per 100ms. The extension
// moves the queue's end with its sleeping waits, also when the queue is
// due exactly at the first pause's end (were it left, the waits after it
// would find the bucket full again: k + 10 at the end).
func TestPauseExtendedAtItsEnd(t *testing.T) {
	const (
		burst    = 10
		interval = 100e3 // µs per unit at 10/s
	)
	for _, k := range []int{3, burst} {
		t.Run(fmt.Sprintf("k=%d", k), func(t *testing.T) {
			_, c := startRedis(t)
			q := New(c, "pause-extended-end", throttle.Limit{Rate: 10, Burst: burst})
			q.Timeout = time.Second
			q.MaxLease = 1 // k waits, k tickets: the state counts them
			defer q.Close()
			w := q.For("k").(*keyWaiter)
			ctx := context.Background()
			if err := w.Pause(ctx, 600*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			_, end1, _ := hashState(t, c, w.rkey)
			var waits []func() (int64, error)
			for range k {
				waits = append(waits, startWait(t, ctx, w, 1))
			}
			// The k waits are queued and the first pause has not ended:
			// the extension comes while they are due exactly at its end.
			if st, err := w.State(ctx); err != nil || st.Queued != int64(k) {
				t.Fatalf("State = %+v, %v; want %d units queued", st, err, k)
			}
			if now := redisNow(t, c); now >= end1 {
				t.Fatalf("the first pause ended %.1fms before its extension; the machine is too slow for this test", (now-end1)/1e3)
			}
			if err := w.Pause(ctx, 1500*time.Millisecond); err != nil { // extends it
				t.Fatal(err)
			}
			_, end, _ := hashState(t, c, w.rkey)
			for range burst {
				waits = append(waits, startWait(t, ctx, w, 1))
			}
			var turns []int64
			for _, f := range waits {
				turn, err := f()
				if err != nil {
					t.Fatal(err)
				}
				turns = append(turns, turn)
			}
			slices.Sort(turns)
			t.Logf("pause extended by %.0fms; turns from its end (ms): %v", (end-end1)/1e3, relMs(turns, end))
			// A full bucket at the end: the first burst units go then,
			// each further one an interval after the one before. The
			// turns are Redis's µs; 2µs is the rounding of a wait to µs.
			for i, turn := range turns {
				want := end + float64(max(0, i-burst+1))*interval
				if d := float64(turn) - want; d < -2 || d > 2 {
					t.Errorf("turn %d at %+.3fms from the extended pause's end; want %+.3fms (burst %d, then 10/s)", i, (float64(turn)-end)/1e3, (want-end)/1e3, burst)
				}
			}
		})
	}
}
