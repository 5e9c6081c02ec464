package distributed

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/throttle-go/throttle"
)

// TestConfigMismatch: two processes (two Limiters, two clients) name the
// same quota with different limits (2/s and 200/s, the case that
// ran at 4/s): the second is refused with a ConfigError naming both, on
// every kind of call, without its fail mode or breaker, and the first
// keeps its pace.
func TestConfigMismatch(t *testing.T) {
	s, c1 := startRedis(t)
	c2 := newClient(t, s.Addr())
	ctx := context.Background()
	var mu sync.Mutex
	var events []throttle.Event
	q1 := New(c1, "shared", throttle.Limit{Rate: 2, Burst: 1})
	q2 := New(c2, "shared", throttle.Limit{Rate: 200, Burst: 10})
	q2.FailMode = FailOpen // a fail mode would admit: it must not apply
	q2.OnEvent = func(e throttle.Event) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}
	defer q1.Close()
	defer q2.Close()
	if err := q1.For("k").WaitN(ctx, 1); err != nil {
		t.Fatal(err)
	}
	w2 := q2.For("k")
	check := func(what string, err error) {
		t.Helper()
		var ce *ConfigError
		if !errors.Is(err, ErrConfigMismatch) || !errors.As(err, &ce) {
			t.Fatalf("%s: %v, want a *ConfigError", what, err)
		}
		if ce.Rate != 200 || ce.Burst != 10 || ce.StoredRate != 2 || ce.StoredBurst != 1 || ce.Name != "shared" || ce.Key != "k" {
			t.Errorf("%s: %+v", what, *ce)
		}
		if errors.Is(err, ErrStoreUnavailable) {
			t.Errorf("%s: %v matches ErrStoreUnavailable: the store answered", what, err)
		}
	}
	for range 5 { // the breaker would open after a few failures
		check("WaitN", w2.WaitN(ctx, 1))
	}
	_, _, err := w2.Try(ctx, throttle.Cost{N: 1})
	check("Try", err)
	_, err = w2.ReserveN(ctx, 1)
	check("ReserveN", err)
	_, err = w2.State(ctx)
	check("State", err)
	check("Pause", w2.Pause(ctx, time.Millisecond))
	if !strings.Contains(err.Error(), "raise Version") {
		t.Errorf("the error does not say what to do: %v", err)
	}
	mu.Lock()
	if len(events) != 0 {
		t.Errorf("events %v; want none (no store error, no fallback)", events)
	}
	mu.Unlock()
	// Another key of q2 has no state yet: it is q2's.
	if err := q2.For("other").WaitN(ctx, 1); err != nil {
		t.Errorf("a key with no state: %v", err)
	}
	// q1 still runs at 2/s: its second unit is 500 ms away.
	if ok, retryIn, err := q1.For("k").Try(ctx, throttle.Cost{N: 1}); err != nil || ok || retryIn < 400e6 {
		t.Errorf("q1's try after its burst: ok %v, retry in %v, %v; want refused for ~500ms", ok, retryIn, err)
	}
}

// TestConfigVersion: a process with a higher Version replaces the key's
// configuration; the processes with a lower one follow it, reporting an
// EventConfig once, and take its burst and pace; one with the same
// version and another configuration is refused.
func TestConfigVersion(t *testing.T) {
	s, c1 := startRedis(t)
	ctx := context.Background()
	var mu sync.Mutex
	var events []throttle.Event
	old := New(c1, "versioned", throttle.Limit{Rate: 2, Burst: 1})
	old.OnEvent = func(e throttle.Event) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}
	next := New(newClient(t, s.Addr()), "versioned", throttle.Limit{Rate: 1000, Burst: 10})
	next.Version = 1
	other := New(newClient(t, s.Addr()), "versioned", throttle.Limit{Rate: 50, Burst: 5})
	other.Version = 1
	defer old.Close()
	defer next.Close()
	defer other.Close()
	for _, q := range []*Limiter{old, next, other} {
		// A call that a loaded machine stalls past the default 50ms would
		// fall back to the process's own limits: this is no outage test.
		q.Timeout = time.Second
	}

	if err := old.For("k").WaitN(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := next.For("k").WaitN(ctx, 1); err != nil {
		t.Fatalf("a higher Version: %v, want it to replace the configuration", err)
	}
	// old follows Version 1: 1000/s, burst 10. Before it adopts, a cost
	// of 5 is above its own burst of 1; the first call adopts (a wait of
	// one unit), then costs up to 10 are served.
	if err := old.For("k").WaitN(ctx, 1); err != nil {
		t.Fatalf("a lower Version after a replacement: %v, want it to follow", err)
	}
	if err := old.For("k").WaitN(ctx, 5); err != nil {
		t.Errorf("a cost of 5 after following burst 10: %v", err)
	}
	mu.Lock()
	var kinds []throttle.Event
	for _, e := range events {
		if e.Kind == throttle.EventConfig {
			kinds = append(kinds, e)
		}
	}
	mu.Unlock()
	if len(kinds) != 1 || kinds[0].Rate != 1000 || kinds[0].Burst != 10 || !strings.Contains(kinds[0].Reason, "Version 1") {
		t.Errorf("EventConfig events %+v; want one, 1000/s burst 10, naming Version 1", kinds)
	}
	// A second process of Version 1 with another limit: refused.
	var ce *ConfigError
	if err := other.For("k").WaitN(ctx, 1); !errors.As(err, &ce) || ce.StoredVersion != 1 || ce.StoredRate != 1000 {
		t.Errorf("the same Version, another limit: %v, want a ConfigError naming Version 1's 1000/s", err)
	}
}

// TestParseStoredKeepsInterval: a configuration adopted from the
// script's refusal sends the interval the state keeps, byte for byte,
// whatever wrote it: derived back through the limit (1e6/(1e6/x)), about
// one interval in eight differs in its last digit, and the adopting
// process would be refused again as configured otherwise.
func TestParseStoredKeepsInterval(t *testing.T) {
	_, c := startRedis(t)
	ctx := context.Background()
	for i := 1; i <= 300; i++ {
		interval := strconv.FormatFloat(float64(i)*0.37, 'g', -1, 64)
		err := c.Eval(ctx, "return redis.error_reply(ARGV[1])", nil, "THROTTLE_CONFIG "+interval+"/5:2").Err()
		got, ok := parseStored(err)
		if !ok {
			t.Fatalf("parseStored(%v) failed", err)
		}
		if got.interval != interval || got.burstArg != "5:2" || got.version != 2 {
			t.Errorf("stored %s/5:2: adopted interval %v, burst %v, version %d; want them as stored",
				interval, got.interval, got.burstArg, got.version)
		}
	}
}
