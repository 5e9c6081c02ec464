package distributed

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/throttle-go/throttle"
)

// TestLimitsFastPath checks mwait's fast path (a key whose further limits
// the core carries, CORE_XC in schedule.lua) at each kind's edge: a
// limit of 4 requests takes 4 one at a time and refuses the fifth, the
// first wait through the general path, the others through the fast path
// (the key's core is of tag 4 after each). A fast path one unit too
// generous, or one that forgot a limit, lets the fifth go.
func TestLimitsFastPath(t *testing.T) {
	_, c := startRedis(t)
	one := throttle.Cost{N: 1, Units: map[string]int{"requests": 1}}
	// Further limits before the one that binds, in units the waits do
	// not spend: 2, 3 and 4 limits (the fast path's formats differ).
	roomy := func(n int) []throttle.Limit {
		ls := []throttle.Limit{{Rate: 1e6, Burst: 1e6}}
		for i := range n {
			ls = append(ls, throttle.Limit{Unit: fmt.Sprintf("u%d", i), Rate: 1, Burst: 10})
		}
		return ls
	}
	for _, tt := range []struct {
		name  string
		l     throttle.Limit
		roomy int
	}{
		{"bucket", throttle.Limit{Unit: "requests", Rate: 1.0 / 3600, Burst: 4}, 0},
		{"fixed", throttle.Limit{Unit: "requests", Count: 4, Per: time.Hour}, 0},
		{"sliding", throttle.Limit{Unit: "requests", Count: 4, Per: time.Hour, Kind: throttle.Sliding}, 0},
		{"first use", throttle.Limit{Unit: "requests", Count: 4, Per: time.Hour, Kind: throttle.FromFirstUse}, 0},
		{"fixed, 2 limits", throttle.Limit{Unit: "requests", Count: 4, Per: time.Hour}, 1},
		{"sliding, 3 limits", throttle.Limit{Unit: "requests", Count: 4, Per: time.Hour, Kind: throttle.Sliding}, 2},
		{"bucket, 4 limits", throttle.Limit{Unit: "requests", Rate: 1.0 / 3600, Burst: 4}, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q := New(c, "limits-fast-"+tt.name, append(roomy(tt.roomy), tt.l)...)
			q.Timeout = time.Second
			q.FailMode = FailClosed // a script error fails the test
			defer q.Close()
			w := q.For("k")
			for i := range 4 {
				if err := w.Wait(t.Context(), one); err != nil {
					t.Fatalf("wait %d of 4: %v", i+1, err)
				}
				if tag := coreTag(t, q, "k"); tag != 4 {
					t.Fatalf("core after wait %d: tag %d; want 4 (the limits in the core)", i+1, tag)
				}
			}
			ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
			defer cancel()
			if err := w.Wait(ctx, one); !errors.Is(err, throttle.ErrWouldExceedDeadline) {
				t.Fatalf("a fifth wait within the hour = %v; want ErrWouldExceedDeadline", err)
			}
		})
	}
}

// TestLimitsFastPathSliding checks the fast path's sliding window past
// its first window: 4 per second, 4 spent in one second; at a fraction f
// of the next, 4·(1 − f) of them still count, so that at f in [0.30,
// 0.40] one more goes (4·0.7 + 1 ≤ 4) and a second does not (4·0.6 + 2
// > 4). The two waits are taken within that range of Redis's clock (a
// try whose second wait ends outside it is taken again, 3 tries).
func TestLimitsFastPathSliding(t *testing.T) {
	t.Parallel()
	_, c := startRedis(t)
	one := throttle.Cost{N: 1, Units: map[string]int{"requests": 1}}
	frac := func() float64 { // Redis's clock in the current second, 0 to 1
		now := redisNow(t, c) / 1e6
		return now - math.Floor(now)
	}
	for try := range 3 {
		q := New(c, "limits-fast-rollover", throttle.Limit{Rate: 1e6, Burst: 1e6}, throttle.Limit{Unit: "requests", Count: 4, Per: time.Second, Kind: throttle.Sliding})
		q.Timeout = time.Second
		q.FailMode = FailClosed
		q.Version = try // a new state each try
		w := q.For("k")
		// Spend 4 early in a second, so that all 4 fall in it.
		for f := frac(); f > 0.5; f = frac() {
			time.Sleep(time.Duration((1.02-f)*1e3) * time.Millisecond)
		}
		for i := range 4 {
			if err := w.Wait(t.Context(), one); err != nil {
				t.Fatalf("wait %d of 4: %v", i+1, err)
			}
		}
		// Into the next second, at f ≥ 0.30.
		if f := frac(); f < 0.30 || f > 0.5 {
			time.Sleep(time.Duration((1.30-f)*1e3)*time.Millisecond + 2*time.Millisecond)
		} else {
			time.Sleep(time.Duration((0.30-f)*1e3)*time.Millisecond + time.Second)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		err1 := w.Wait(t.Context(), one)
		err2 := w.Wait(ctx, one)
		cancel()
		tag := coreTag(t, q, "k")
		q.Close()
		if f := frac(); f < 0.30 || f > 0.40 {
			t.Logf("try %d: the waits ended at f = %.3f, outside [0.30, 0.40]: again", try+1, f)
			continue
		}
		if err1 != nil {
			t.Fatalf("at f in [0.30, 0.40] with 4 in the second before: a wait = %v; want it to go (4·0.7 + 1 ≤ 4)", err1)
		}
		if !errors.Is(err2, throttle.ErrWouldExceedDeadline) {
			t.Fatalf("then a second = %v; want ErrWouldExceedDeadline (4·0.6 + 2 > 4)", err2)
		}
		if tag != 4 {
			t.Fatalf("core after the waits: tag %d; want 4 (the fast path's form)", tag)
		}
		return
	}
	t.Fatal("3 tries, none inside [0.30, 0.40] of a second")
}

// coreTag returns the first byte of key's core in q's Redis (0: none).
func coreTag(tb testing.TB, q *Limiter, key string) byte {
	tb.Helper()
	w := q.For(key).(*keyWaiter)
	raw, err := q.client.HGet(context.Background(), w.rkey, "c").Result()
	if err != nil || raw == "" {
		return 0
	}
	return raw[0]
}
