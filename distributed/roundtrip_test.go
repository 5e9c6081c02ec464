package distributed

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/internal/redistest"
)

// commandStats parses INFO commandstats into calls per command. It asks on
// a connection of its own, not the client's.
func commandStats(tb testing.TB, s *redistest.Server) map[string]int64 {
	tb.Helper()
	info, err := s.Do("INFO", "commandstats")
	if err != nil {
		tb.Fatalf("INFO commandstats: %v", err)
	}
	calls := make(map[string]int64)
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		for _, f := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				calls[strings.TrimPrefix(name, "cmdstat_")], _ = strconv.ParseInt(v, 10, 64)
			}
		}
	}
	return calls
}

// subscribed reports whether q's subscription to pushed moves is up.
func subscribed(q *Limiter) bool {
	_, sub := q.pushes.mark()
	return sub.up
}

// TestOneCommandPerWait counts what Redis executes: in steady state a wait
// that goes at once is one EVALSHA from the client and nothing else (one
// that sleeps asks once more before it goes: TestTwoCommandsPerSleepingWait).
// (Redis 7 also counts the commands a script runs; those are listed and
// checked separately: the reserve script's four per wait.)
func TestOneCommandPerWait(t *testing.T) {
	s, c := startRedis(t)
	ctx := context.Background()

	q := New(c, "roundtrip", throttle.Limit{Rate: 1e6, Burst: 1000}) // no wait sleeps
	w := q.For("k")
	// Warm up: connection, script load (NOSCRIPT, then EVAL).
	for range 3 {
		if err := w.WaitN(ctx, 1); err != nil {
			t.Fatalf("warm-up WaitN = %v", err)
		}
	}
	if reply, err := s.Do("CONFIG", "RESETSTAT"); err != nil || reply != "+OK" {
		t.Fatalf("CONFIG RESETSTAT = %q, %v", reply, err)
	}
	const waits = 200
	for range waits {
		if err := w.WaitN(ctx, 1); err != nil {
			t.Fatalf("WaitN = %v", err)
		}
	}
	calls := commandStats(t, s)
	perWait := float64(calls["evalsha"]) / waits
	t.Logf("%d waits: %d EVALSHA = %.2f per wait; all commands: %v", waits, calls["evalsha"], perWait, calls)
	if perWait != 1 {
		t.Errorf("EVALSHA per wait = %.3f; want 1.0", perWait)
	}
	inScript := map[string]bool{"time": true, "hget": true, "hmget": true, "hgetall": true, "hset": true, "pexpire": true, "hdel": true}
	for cmd, n := range calls {
		switch {
		case cmd == "evalsha":
		case inScript[cmd]:
			if n != waits {
				t.Errorf("reserve script ran %s %d times in %d waits; want once per wait", cmd, n, waits)
			}
		case strings.HasPrefix(cmd, "config"): // the measurement itself
		default:
			t.Errorf("Redis ran %d × %s during the waits; want only EVALSHA (and the script's own commands)", n, cmd)
		}
	}
}

// TestTwoCommandsPerSleepingWait: waits that sleep long enough to listen
// for pushed pauses (see pauses) cost two EVALSHA each in steady state:
// the ticket, and one ask as the turn comes, unless an ask a push
// caused found it gone (a wait that passed this one
// within a push's latency of its turn may not have been pushed yet: see
// keyWaiter.sleep's confirm); however many pushes came meanwhile, no
// more. Goroutines that keep sleeping keep one subscription up, so the
// only other commands are that subscription's HELLO (a new connection)
// and SUBSCRIBE: here once, as the measured waits start sleeping, at most
// once more should every sleeper wake at the same instant.
func TestTwoCommandsPerSleepingWait(t *testing.T) {
	t.Parallel()
	s, c := startRedis(t)
	ctx := context.Background()
	q := New(c, "roundtrip-sleep", throttle.Limit{Rate: 200, Burst: 1}) // 5ms per unit, 4 goroutines: ~20ms sleeps
	q.Timeout = time.Second                                             // a loaded machine must not make this an outage test
	q.MaxLease = 1                                                      // one call per wait: leases are counted in lease_test.go
	w := q.For("k")
	const goroutines, waits = 4, 50
	var started, measured sync.WaitGroup
	started.Add(goroutines)
	reset := make(chan struct{})
	for range goroutines {
		measured.Go(func() {
			for range 5 { // warm up: connections, script load
				if err := w.WaitN(ctx, 1); err != nil {
					t.Errorf("warm-up WaitN = %v", err)
				}
			}
			started.Done()
			<-reset
			for range waits {
				if err := w.WaitN(ctx, 1); err != nil {
					t.Errorf("WaitN = %v", err)
					return
				}
			}
		})
	}
	started.Wait()
	for i := 0; !subscribed(q); i++ { // the subscription up, as in TestOneCommandPerWait
		if i == 400 {
			t.Fatal("the subscription to pushed moves did not come up in 400 waits")
		}
		if err := w.WaitN(ctx, 1); err != nil {
			t.Fatalf("warm-up WaitN = %v", err)
		}
	}
	if reply, err := s.Do("CONFIG", "RESETSTAT"); err != nil || reply != "+OK" {
		t.Fatalf("CONFIG RESETSTAT = %q, %v", reply, err)
	}
	close(reset)
	measured.Wait()
	calls := commandStats(t, s)
	total := goroutines * waits
	t.Logf("%d waits: %d EVALSHA; all commands: %v", total, calls["evalsha"], calls)
	if calls["evalsha"] < int64(total) || calls["evalsha"] > 2*int64(total) {
		t.Errorf("EVALSHA = %d in %d waits; want two per wait at most (its ticket, and the ask before it goes, unless a push's ask found it gone)", calls["evalsha"], total)
	}
	inScript := map[string]bool{"time": true, "hget": true, "hmget": true, "hgetall": true, "hset": true, "pexpire": true, "hdel": true}
	for cmd, n := range calls {
		switch {
		case cmd == "evalsha", inScript[cmd], strings.HasPrefix(cmd, "config"):
		case cmd == "subscribe", cmd == "unsubscribe", cmd == "hello": // hello: the subscription's connection
			if n > 2 {
				t.Errorf("%d × %s in %d waits; want the subscription kept up while waits sleep", n, cmd, total)
			}
		default:
			t.Errorf("Redis ran %d × %s during the waits; want only EVALSHA, the script's commands and the subscription", n, cmd)
		}
	}
}
