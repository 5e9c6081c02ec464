package distributed

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/internal/redistest"
)

// eventLog collects a Limiter's events.
type eventLog struct {
	mu     sync.Mutex
	events []throttle.Event
}

func (l *eventLog) add(e throttle.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

// of returns the events of kind k.
func (l *eventLog) of(k throttle.EventKind) []throttle.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []throttle.Event
	for _, e := range l.events {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

// TestStall stalls Redis for 1s (CLIENT PAUSE ALL: every command waits,
// as in a long DEBUG SLEEP, a fork on a big dataset, a failover in
// progress) and checks, for a client with go-redis's default options
// (ContextTimeoutEnabled false: it ignores context deadlines while it
// reads a reply, for up to ReadTimeout, 3s) and for one that honours them:
//
//   - every wait during the stall answers by the FailMode (FailClosed:
//     an error matching ErrStoreUnavailable that says Redis did not
//     answer in time) within Timeout + margin;
//   - the late calls, answered when the stall ends, give back the tickets
//     they took: at 10/s and burst 1 each ticket left behind would delay
//     the first wait after the stall by 100ms more;
//   - the events: store errors per failed call (not per wait), the
//     breaker opening and closing once each, fallbacks rate-limited.
func TestStall(t *testing.T) {
	t.Parallel()
	const (
		limit, burst = 10, 1 // 100ms apart: a ticket left in the queue shows
		interval     = 100 * time.Millisecond
		stall        = time.Second
		// The call returns at Timeout by its own timer; what remains is
		// goroutine scheduling on a loaded 2-core machine under -race,
		// as in TestOutage.
		margin = 100 * time.Millisecond
	)
	for _, tt := range []struct {
		name   string
		client func(addr string) redis.UniversalClient
		inline bool // the calls run inline (see honoursDeadlines)
	}{
		{"default-options", func(a string) redis.UniversalClient { return redis.NewClient(&redis.Options{Addr: a}) }, true},
		{"ContextTimeoutEnabled", func(a string) redis.UniversalClient {
			return redis.NewClient(&redis.Options{Addr: a, ContextTimeoutEnabled: true})
		}, true},
		// A Ring (a Cluster too) with default options has no WithTimeout
		// copy: its calls run in a goroutine of their own.
		{"ring-default-options", func(a string) redis.UniversalClient {
			return redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": a}})
		}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := redistest.Start(t)
			c := tt.client(s.Addr())
			t.Cleanup(func() { c.Close() })
			q := New(c, "stall", throttle.Limit{Rate: limit, Burst: burst})
			q.FailMode = FailClosed
			var log eventLog
			q.OnEvent = log.add
			ctx := context.Background()
			for range 4 { // connections for the waiters below, and the script
				if err := c.Ping(ctx).Err(); err != nil {
					t.Fatal(err)
				}
			}
			if err := q.WaitN(ctx, 1); err != nil {
				t.Fatalf("WaitN before the stall: %v", err)
			}

			if r, err := s.Do("CLIENT", "PAUSE", strconv.FormatInt(stall.Milliseconds(), 10), "ALL"); err != nil || r != "+OK" {
				t.Fatalf("CLIENT PAUSE = %q, %v", r, err)
			}
			paused := time.Now()
			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				waits   int
				longest time.Duration
				errs    []error
			)
			for range 4 {
				wg.Go(func() {
					for time.Since(paused) < stall-2*q.timeout()-margin {
						start := time.Now()
						err := q.WaitN(ctx, 1)
						d := time.Since(start)
						mu.Lock()
						waits++
						longest = max(longest, d)
						errs = append(errs, err)
						mu.Unlock()
						time.Sleep(5 * time.Millisecond)
					}
				})
			}
			wg.Wait()
			if bound := q.timeout() + margin; longest > bound {
				t.Errorf("longest wait during the stall: %v; want ≤ %v (Timeout + margin)", longest, bound)
			}
			timeouts := 0
			for i, err := range errs {
				if !errors.Is(err, ErrStoreUnavailable) {
					t.Fatalf("wait %d during the stall: %v; want an error matching ErrStoreUnavailable", i, err)
				}
				var to interface{ Timeout() bool }
				if errors.As(err, &to) && to.Timeout() {
					timeouts++
				}
			}
			if timeouts == 0 || !strings.Contains(errs[0].Error(), "did not answer within") {
				t.Errorf("first error %q, %d errors with Timeout() = true; want Redis not answering in time", errs[0], timeouts)
			}

			// After the stall: Close waits for the late calls (and their
			// refunds); then the first wait Redis serves (the breaker's
			// probe) goes within one interval: the one late ticket whose
			// turn had come when the stall ended is spent, the others
			// came back.
			time.Sleep(time.Until(paused.Add(stall)))
			q.Close()
			var served time.Duration
			for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				start := time.Now()
				if err := q.WaitN(ctx, 1); err == nil {
					served = time.Since(start)
					break
				}
			}
			if served == 0 || served > interval+margin {
				t.Errorf("first wait served after the stall took %v; want ≤ %v (one interval + margin; each ticket of a late call left in the queue adds %v)", served, interval+margin, interval)
			}

			storeErrs, opened, closed, fallbacks := log.of(throttle.EventStoreError), log.of(throttle.EventBreakerOpen), log.of(throttle.EventBreakerClose), log.of(throttle.EventFallback)
			t.Logf("%d waits during the %v stall, longest %v; first served after it in %v; events: %d store-error, %d breaker-open, %d breaker-close, %d fallback",
				waits, stall, longest.Round(time.Millisecond), served.Round(time.Millisecond), len(storeErrs), len(opened), len(closed), len(fallbacks))
			// Failed calls: the threshold's, then one probe per cooldown;
			// a client that honours deadlines reports its timeouts through
			// one diagnosing PING at a time (see callInline), so at least
			// one.
			least := breakerThreshold
			if tt.inline {
				least = 1
			}
			if max := breakerThreshold + int(stall/breakerCooldown) + 1; len(storeErrs) < least || len(storeErrs) > max {
				t.Errorf("%d store-error events for %d waits; want %d to %d (one per failed call, not per wait)", len(storeErrs), waits, least, max)
			}
			if len(opened) != 1 || opened[0].Delay != breakerCooldown {
				t.Errorf("breaker-open events: %v; want one, Delay %v", opened, breakerCooldown)
			}
			if len(closed) != 1 {
				t.Errorf("breaker-close events: %v; want one", closed)
			}
			if n := len(fallbacks); n < 1 || n > int(stall/fallbackEvery)+1 || !strings.HasPrefix(fallbacks[0].Reason, "FailClosed") {
				t.Errorf("fallback events: %v; want 1 to %d, Reason FailClosed…", fallbacks, int(stall/fallbackEvery)+1)
			}
		})
	}
}

// TestRefusedCause: with nothing listening on Redis's port, a FailClosed
// wait's error says so (not "context deadline exceeded"): it matches
// ErrStoreUnavailable, and errors.Is and errors.As reach the dial error,
// at the latest once the first call's outcome is known.
func TestRefusedCause(t *testing.T) {
	t.Parallel()
	for _, enabled := range []bool{false, true} {
		t.Run(fmt.Sprintf("ContextTimeoutEnabled=%v", enabled), func(t *testing.T) {
			testRefusedCause(t, enabled)
		})
	}
}

func testRefusedCause(t *testing.T, contextTimeout bool) {
	s := redistest.Start(t)
	s.Stop() // the port refuses connections now
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), ContextTimeoutEnabled: contextTimeout})
	t.Cleanup(func() { c.Close() })
	q := New(c, "refused", throttle.Limit{Rate: 100, Burst: 10})
	q.FailMode = FailClosed
	var log eventLog
	q.OnEvent = log.add
	defer q.Close()
	ctx := context.Background()
	var (
		err   error
		found bool
	)
	// The first calls end at Timeout while the client still retries the
	// dial (go-redis v9: 3 retries of 5 dial attempts each, 1.8s in all
	// here); from the first one that ends (or the diagnosing PING, for a
	// client that honours deadlines), the cause is known. lateBound (3s)
	// bounds that.
	for deadline := time.Now().Add(lateBound + time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		err = q.WaitN(ctx, 1)
		if !errors.Is(err, ErrStoreUnavailable) {
			t.Fatalf("WaitN with Redis refusing = %v; want an error matching ErrStoreUnavailable", err)
		}
		var op *net.OpError
		if errors.As(err, &op) && errors.Is(err, syscall.ECONNREFUSED) {
			found = true
			break
		}
	}
	if !found {
		t.Fatalf("WaitN with Redis refusing = %v; want the refused dial reachable with errors.Is/As", err)
	}
	if !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("error %q does not say the connection was refused", err)
	}
	refused := false
	for _, e := range log.of(throttle.EventStoreError) {
		if errors.Is(e.Err, syscall.ECONNREFUSED) {
			refused = true
		}
	}
	if !refused {
		t.Errorf("no store-error event carries the refused dial: %v", log.of(throttle.EventStoreError))
	}
}

// TestFallbackEvents: EventFallback says which FailMode answered and how,
// comes at once for the first fallback of an outage, then at most once
// per fallbackEvery with the number of waits it stands for, and at once
// again after Redis answered.
func TestFallbackEvents(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never called
	defer c.Close()
	q := New(c, "fallback", throttle.Limit{Rate: 100, Burst: 10})
	q.now = func() time.Time { return now }
	q.Workers = 4
	var log eventLog
	q.OnEvent = log.add
	for range 5 {
		q.fellBack(context.Background(), "k", errBreakerOpen)
	}
	now = now.Add(fallbackEvery - time.Millisecond)
	q.fellBack(context.Background(), "k", errBreakerOpen)
	now = now.Add(time.Millisecond)
	q.fellBack(context.Background(), "k", errBreakerOpen)
	q.FailMode = FailClosed
	q.recover() // Redis answered
	q.fellBack(context.Background(), "k", errBreakerOpen)

	got := log.of(throttle.EventFallback)
	want := []string{
		"FailLocal: paced in this process at 25/s (rate 100/s ÷ Workers 4)",
		"FailLocal: paced in this process at 25/s (rate 100/s ÷ Workers 4); 6 waits answered so since the last report",
		"FailClosed: refused",
	}
	if len(got) != len(want) {
		t.Fatalf("%d fallback events: %v; want %d", len(got), got, len(want))
	}
	for i, e := range got {
		if e.Reason != want[i] || e.Key != "k" || !errors.Is(e.Err, errBreakerOpen) {
			t.Errorf("event %d = %q, key %q, err %v; want %q, key k, the cause", i, e.Reason, e.Key, e.Err, want[i])
		}
	}
}

// TestCancelInFlight: a wait whose context ends while its reserving call
// is held up (CLIENT PAUSE) returns (at once with a client of default
// options; when Redis answers with a client that honours deadlines, whose
// calls run inline), and the ticket the call takes when Redis resumes is
// given back: at 10/s, each ticket left behind would delay the next wait
// by 100ms.
func TestCancelInFlight(t *testing.T) {
	t.Parallel()
	t.Run("default", func(t *testing.T) {
		testCancelInFlight(t, true, func(a string) redis.UniversalClient { return redis.NewClient(&redis.Options{Addr: a}) })
	})
	t.Run("ContextTimeoutEnabled", func(t *testing.T) {
		testCancelInFlight(t, true, func(a string) redis.UniversalClient {
			return redis.NewClient(&redis.Options{Addr: a, ContextTimeoutEnabled: true})
		})
	})
	t.Run("ring-default-options", func(t *testing.T) {
		testCancelInFlight(t, false, func(a string) redis.UniversalClient {
			return redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": a}})
		})
	})
}

func testCancelInFlight(t *testing.T, inline bool, client func(addr string) redis.UniversalClient) {
	const (
		interval = 100 * time.Millisecond // 10/s
		margin   = 100 * time.Millisecond // scheduling on a loaded machine, as in TestStall
		pause    = 300 * time.Millisecond
	)
	s := redistest.Start(t)
	c := client(s.Addr())
	t.Cleanup(func() { c.Close() })
	q := New(c, "inflight", throttle.Limit{Rate: 10, Burst: 1})
	q.Timeout = time.Second // the calls below are cut by their contexts, not by Timeout
	ctx := context.Background()
	for range 4 {
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.WaitN(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Do("CLIENT", "PAUSE", strconv.Itoa(int(pause.Milliseconds())), "ALL"); err != nil || r != "+OK" {
		t.Fatalf("CLIENT PAUSE = %q, %v", r, err)
	}
	// A PING held up by the same pause: it is answered when the calls
	// are, which is when an inline call's wait may return.
	answered := make(chan time.Time, 1)
	go func() {
		c.Ping(ctx)
		answered <- time.Now()
	}()
	var wg sync.WaitGroup
	type result struct {
		err   error
		start time.Time
		end   time.Time
	}
	results := make(chan result, 4)
	for range 4 {
		wg.Go(func() {
			cctx, cancel := context.WithCancel(ctx)
			time.AfterFunc(30*time.Millisecond, cancel)
			start := time.Now()
			err := q.WaitN(cctx, 1)
			results <- result{err, start, time.Now()}
		})
	}
	wg.Wait()
	close(results)
	ping := <-answered
	for r := range results {
		switch d := r.end.Sub(r.start); {
		case !errors.Is(r.err, context.Canceled):
			t.Errorf("WaitN cancelled during a held-up call = %v after %v; want context.Canceled", r.err, d)
		case inline && r.end.Sub(ping) > margin:
			// The call ends when Redis answers.
			t.Errorf("WaitN cancelled during a held-up call returned %v after Redis answered a PING held up with it; want within %v", r.end.Sub(ping), margin)
		case !inline && d > 30*time.Millisecond+margin:
			t.Errorf("WaitN cancelled during a held-up call returned after %v; want within %v of the cancel (30ms)", d, margin)
		}
	}
	time.Sleep(pause)
	q.Close() // the late calls, and their refunds, are done
	start := time.Now()
	if err := q.WaitN(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > interval+margin {
		t.Errorf("the wait after the held-up calls took %v; want ≤ %v (each ticket of a late call left behind adds %v)", d, interval+margin, interval)
	}
}
