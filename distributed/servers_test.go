package distributed

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/internal/redistest"
)

// TestServers runs the Limiter's core against each server it claims:
// Redis (Debian bookworm's 7.0) and Valkey (bookworm-backports' 8.0;
// ./test.sh installs it; without it this subtest is skipped, or fails
// when CI is set). What it checks on each: the pace (no more than burst +
// rate·T, and back to back not much slower), a turn past the deadline
// refused at once, a pause for every wait, the script loaded again after
// SCRIPT FLUSH, and FailClosed once the server is gone.
func TestServers(t *testing.T) {
	for _, bin := range []string{"redis-server", "valkey-server"} {
		t.Run(bin, func(t *testing.T) {
			s := redistest.StartWith(t, redistest.Options{Bin: bin})
			c := newClient(t, s.Addr())
			ctx := context.Background()
			if v, err := c.Info(ctx, "server").Result(); err == nil {
				t.Logf("%s: %s", bin, firstLine(v, "valkey_version:", "redis_version:"))
			}
			q := New(c, "servers", throttle.Limit{Rate: 100, Burst: 5})
			q.FailMode = FailClosed
			q.Timeout = time.Second // a loaded machine must not fake an outage
			w := q.For("k").(*keyWaiter)

			t.Run("pace", func(t *testing.T) {
				const n, burst = 25, 5
				var first, last int64
				for i := range n {
					turn, err := w.waitN(ctx, 1)
					if err != nil {
						t.Fatalf("wait %d: %v", i, err)
					}
					if i == 0 {
						first = turn
					}
					last = turn
				}
				// n units in [first, last] need (n - burst)/rate at the
				// least: 200ms, less one interval for the unit at first.
				// Back to back they take little more: 40ms for 25 round
				// trips on a loaded machine.
				span := time.Duration(last-first) * time.Microsecond
				if span < 190*time.Millisecond || span > 240*time.Millisecond {
					t.Errorf("25 waits at 100/s, burst 5 spanned %v of Redis's clock; want 190ms to 240ms", span)
				}
			})
			t.Run("deadline", func(t *testing.T) {
				for range 5 { // a queue 50ms deep
					if err := q.For("d").WaitN(ctx, 1); err != nil {
						t.Fatal(err)
					}
				}
				w := q.For("d")
				var wg sync.WaitGroup
				defer wg.Wait()
				for range 10 {
					wg.Go(func() { _ = w.WaitN(ctx, 1) })
				}
				awaitQueued(t, w, 10)
				dctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
				defer cancel()
				start := time.Now()
				err := w.WaitN(dctx, 1)
				if !errors.Is(err, throttle.ErrWouldExceedDeadline) || time.Since(start) > 25*time.Millisecond {
					t.Errorf("WaitN with a turn past the deadline = %v after %v; want ErrWouldExceedDeadline at once", err, time.Since(start))
				}
			})
			t.Run("pause", func(t *testing.T) {
				p := q.For("p").(*keyWaiter)
				if err := p.Pause(ctx, 300*time.Millisecond); err != nil {
					t.Fatal(err)
				}
				paused := redisNow(t, c)
				turn, err := p.waitN(ctx, 1)
				if err != nil {
					t.Fatal(err)
				}
				if d := time.Duration(int64(float64(turn)-paused)) * time.Microsecond; d < 290*time.Millisecond {
					t.Errorf("turn %v after a 300ms pause; want ≥ 290ms", d)
				}
			})
			t.Run("script flush", func(t *testing.T) {
				if r, err := s.Do("SCRIPT", "FLUSH"); err != nil || r != "+OK" {
					t.Fatalf("SCRIPT FLUSH = %q, %v", r, err)
				}
				if err := q.For("f").WaitN(ctx, 1); err != nil {
					t.Errorf("WaitN after SCRIPT FLUSH = %v", err)
				}
			})
			t.Run("FailClosed", func(t *testing.T) {
				// Each call to the stopped server, and Close's give-back
				// of held tickets, ends at Timeout.
				q.Timeout = 100 * time.Millisecond
				s.Stop()
				if err := q.For("c").WaitN(ctx, 1); !errors.Is(err, ErrStoreUnavailable) {
					t.Errorf("WaitN with %s gone = %v; want ErrStoreUnavailable", bin, err)
				}
			})
			q.Close()
		})
	}
}

// firstLine returns the first line of text that starts with the first
// of prefixes that any line starts with.
func firstLine(text string, prefixes ...string) string {
	for _, p := range prefixes {
		for _, l := range strings.Split(text, "\n") {
			if strings.HasPrefix(l, p) {
				return strings.TrimSpace(l)
			}
		}
	}
	return ""
}
