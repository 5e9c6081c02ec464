package distributed

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttle-go/throttle"
)

// TestScriptErrorIsTheCallsError: a key whose state the script cannot
// read (a core cut short) makes every call on it raise a Lua error.
// Whatever the FailMode, each such call returns that error (reaching the
// redis.Error, not matching ErrStoreUnavailable; a FailOpen wait is not
// admitted), the breaker never opens, and no store error, breaker or
// fallback event is told; a key of the same Limiter with a readable state
// is still paced by Redis afterwards (burst 1: the second try is
// refused, with its turn). Through a client whose calls run inline, and
// through a Ring without ContextTimeoutEnabled, whose calls run in a
// goroutine of their own.
func TestScriptErrorIsTheCallsError(t *testing.T) {
	s, client := startRedis(t)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": s.Addr()}})
	defer ring.Close()
	for _, tc := range []struct {
		name string
		c    redis.UniversalClient
		mode FailMode
	}{
		{"FailOpen", client, FailOpen},
		{"FailClosed", client, FailClosed},
		{"FailLocal", client, FailLocal},
		{"FailOpen,Ring", ring, FailOpen},
	} {
		c, mode := tc.c, tc.mode
		t.Run(tc.name, func(t *testing.T) {
			q := New(c, "scripterr-"+tc.name, throttle.Limit{Rate: 10, Burst: 1})
			q.FailMode = mode
			q.Timeout = time.Second
			var (
				mu     sync.Mutex
				events []throttle.Event
			)
			q.OnEvent = func(e throttle.Event) {
				mu.Lock()
				defer mu.Unlock()
				events = append(events, e)
			}
			defer q.Close()
			ctx := context.Background()
			bad := q.For("bad").(*keyWaiter)
			if err := c.HSet(ctx, bad.rkey, "c", "\x02short").Err(); err != nil {
				t.Fatal(err)
			}
			calls := []struct {
				name string
				call func() error
			}{
				{"WaitN(1)", func() error { return bad.WaitN(ctx, 1) }},
				{"WaitN(1) direct", func() error { _, err := bad.waitDirect(ctx, 1, queueFirst); return err }},
				{"Try", func() error { _, _, err := bad.Try(ctx); return err }},
				{"ReserveN(1)", func() error { _, err := bad.ReserveN(ctx, 1); return err }},
				{"Settle(1, 2)", func() error { return bad.Settle(ctx, throttle.Cost{N: 1}, throttle.Cost{N: 2}) }},
				{"State", func() error { _, err := bad.State(ctx); return err }},
				{"Pause", func() error { return bad.Pause(ctx, time.Second) }},
			}
			for range breakerThreshold + 1 {
				for _, tc := range calls {
					err := tc.call()
					var re redis.Error
					if !errors.As(err, &re) || errors.Is(err, ErrStoreUnavailable) {
						t.Fatalf("%s on a state the script cannot read = %v; want the script's error, not a store failure", tc.name, err)
					}
				}
			}
			w := q.For("good")
			if ok, _, err := w.Try(ctx, throttle.Cost{N: 1}); !ok || err != nil {
				t.Fatalf("first Try on another key = %v, %v; want true", ok, err)
			}
			ok, d, err := w.Try(ctx, throttle.Cost{N: 1})
			if ok || err != nil || d <= 0 || d > 100*time.Millisecond {
				t.Errorf("second Try on another key = %v, %v, %v; want false with its turn within 100ms (Redis answers: the breaker is closed)", ok, d, err)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, e := range events {
				t.Errorf("event %v (%v): the script's errors are no store failure", e.Kind, e.Err)
			}
		})
	}
}

// TestScriptFault: errors a script raises are told apart from a store
// that cannot serve, on a real server: a Lua error, a runtime error, an
// error reply of the schedule script's kind and a command the script
// called that refused its arguments are the script's; a command the
// script called that the store refused for its own condition (out of
// memory), and a connection refused, are store failures. Redis 5 and 6
// name the script in another form, and a store condition inside it so.
func TestScriptFault(t *testing.T) {
	_, c := startRedis(t)
	ctx := context.Background()
	eval := func(src string) error {
		t.Helper()
		err := c.Eval(ctx, src, []string{"k"}).Err()
		if err == nil {
			t.Fatalf("EVAL %q succeeded; want an error", src)
		}
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	down := redis.NewClient(&redis.Options{Addr: closed, MaxRetries: -1})
	defer down.Close()
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"error()", eval("error('boom')"), true},
		{"runtime error", eval("return 1 + nil"), true},
		{"error reply", eval("return redis.error_reply('THROTTLE_X a refusal')"), true},
		{"command refused its arguments", eval("return redis.call('PEXPIRE', KEYS[1], 'soon')"), true},
		{"connection refused", down.Eval(ctx, "return 1", nil).Err(), false},
		{"no error", nil, false},
		{"redis 6 runtime error", olderError("ERR Error running script (call to f_0123): @user_script:1: user_script:1: attempt to perform arithmetic on a nil value"), true},
		{"redis 6 command refused", olderError("ERR Error running script (call to f_0123): @user_script:1: @user_script: 1: value is not an integer or out of range"), true},
		{"redis 6 read-only replica", olderError("ERR Error running script (call to f_0123): @user_script:1: @user_script: 1: -READONLY You can't write against a read only replica."), false},
		{"busy", olderError("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."), false},
		{"loading", olderError("LOADING Redis is loading the dataset in memory"), false},
	}
	// A write the store refuses for its memory, from inside the script.
	if err := c.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	tests = append(tests, struct {
		name string
		err  error
		want bool
	}{"out of memory", eval("return redis.call('SET', KEYS[1], 'v')"), false})
	if err := c.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Logf("%s: %v", tt.name, tt.err)
		if got := scriptFault(tt.err); got != tt.want {
			t.Errorf("%s: scriptFault(%v) = %v; want %v", tt.name, tt.err, got, tt.want)
		}
	}
}

// olderError is an error reply in a form this Redis does not send.
type olderError string

func (e olderError) Error() string { return string(e) }
func (olderError) RedisError()     {}

// TestInvalidVersionRefusedBeforeAnyCall: a Limiter with Version -1, or
// one above 2^53 (past the integers a Lua number holds exactly), is an
// invalid configuration: every call on a key fails with an error
// matching throttle.ErrInvalidLimit before it is made (Redis holds no
// key after them), whatever the FailMode, and no event is told.
func TestInvalidVersionRefusedBeforeAnyCall(t *testing.T) {
	_, c := startRedis(t)
	for _, v := range []int{-1, 1<<53 + 1, math.MaxInt} {
		t.Run(fmt.Sprint(v), func(t *testing.T) { invalidVersion(t, c, v) })
	}
}

func invalidVersion(t *testing.T, c *redis.Client, v int) {
	q := New(c, "version", throttle.Limit{Rate: 10, Burst: 5}, throttle.Limit{Unit: "tokens", Rate: 10, Burst: 5})
	q.Version = v
	q.FailMode = FailOpen
	q.Timeout = time.Second
	q.OnEvent = func(e throttle.Event) { t.Errorf("event %v (%v)", e.Kind, e.Err) }
	defer q.Close()
	ctx := context.Background()
	w := q.For("k").(*keyWaiter)
	tokens := throttle.Cost{N: 1, Units: map[string]int{"tokens": 1}}
	calls := []struct {
		name string
		call func() error
	}{
		{"WaitN(1)", func() error { return w.WaitN(ctx, 1) }},
		{"Try", func() error { _, _, err := w.Try(ctx); return err }},
		{"ReserveN(1)", func() error { _, err := w.ReserveN(ctx, 1); return err }},
		{"Settle(1, 2)", func() error { return w.Settle(ctx, throttle.Cost{N: 1}, throttle.Cost{N: 2}) }},
		{"State", func() error { _, err := w.State(ctx); return err }},
		{"Pause", func() error { return w.Pause(ctx, time.Second) }},
		{"Observe", func() error { _, err := w.Observe(ctx, throttle.Feedback{Pause: time.Second}); return err }},
		{"Wait(tokens)", func() error { return w.Wait(ctx, tokens) }},
		{"Settle(tokens)", func() error { return w.Settle(ctx, tokens, throttle.Cost{}) }},
	}
	for _, tc := range calls {
		if err := tc.call(); !errors.Is(err, throttle.ErrInvalidLimit) || errors.Is(err, ErrStoreUnavailable) {
			t.Errorf("%s with Version %d = %v; want an error matching ErrInvalidLimit", tc.name, v, err)
		}
	}
	if n, err := c.DBSize(ctx).Result(); err != nil || n != 0 {
		t.Errorf("DBSIZE = %d, %v; want 0: no call reaches the script", n, err)
	}
}
