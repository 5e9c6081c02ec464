package distributed

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/internal/redistest"
)

// subscribes returns how many SUBSCRIBE commands the server has run.
func subscribes(tb testing.TB, s *redistest.Server) int {
	tb.Helper()
	info, err := s.Do("INFO", "commandstats")
	if err != nil {
		tb.Fatalf("INFO commandstats: %v", err)
	}
	_, rest, ok := strings.Cut(info, "cmdstat_subscribe:calls=")
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
	if err != nil {
		tb.Fatalf("INFO commandstats: %v in %q", err, info)
	}
	return n
}

// TestPushChurn: when one wait sleeps at a time (a single worker at 20/s:
// each wait sleeps about 50ms, and the next comes right after), the
// subscription to pushed moves is made once, not once per sleep; a gap
// shorter than pushLinger keeps it too; only a gap longer than that ends
// it (the next sleep subscribes again: the count below shows the counter
// sees subscriptions).
func TestPushChurn(t *testing.T) {
	t.Parallel()
	s, c := startRedis(t)
	q := New(c, "churn", throttle.Limit{Rate: 20, Burst: 1})
	q.Timeout = time.Second // a loaded machine must not fake an outage
	defer q.Close()
	ctx := context.Background()
	before := subscribes(t, s)
	sleeps := 0
	wait := func() {
		t.Helper()
		start := time.Now()
		if err := q.WaitN(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if time.Since(start) >= 10*time.Millisecond {
			sleeps++
		}
	}
	for range 20 {
		wait()
	}
	time.Sleep(pushLinger / 2)
	for range 5 {
		wait()
	}
	if got := subscribes(t, s) - before; got != 1 || sleeps < 20 {
		t.Errorf("%d SUBSCRIBE for %d sleeping waits, one at a time, gaps under %v; want 1", got, sleeps, pushLinger)
	}
	time.Sleep(pushLinger + 200*time.Millisecond) // the subscription ends
	for range 3 {
		wait()
	}
	if got := subscribes(t, s) - before; got != 2 {
		t.Errorf("%d SUBSCRIBE after a gap over %v; want 2", got, pushLinger)
	}
}
