package throttle

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// A refund scenario: waits on one key of a Limiter at 10/s, arriving at
// given times in order, some cancelled later.
type refundWait struct {
	arrive time.Duration
	n      int
	cancel time.Duration // when its context is cancelled; 0 for never
}

// refundRun runs waits in a synctest bubble and returns when each went
// (-1 for a wait that did not go).
func refundRun(t *testing.T, burst int, waits []refundWait) []time.Duration {
	t.Helper()
	ends := make([]time.Duration, len(waits))
	synctest.Test(t, func(t *testing.T) {
		l := &Limiter{Limits: []Limit{{Rate: 10, Burst: burst}}}
		k := l.For("k")
		start := time.Now()
		// Events in time order, arrivals before cancels at one instant,
		// each handled before the next (synctest.Wait).
		type event struct {
			at     time.Duration
			cancel bool
			i      int
		}
		var evs []event
		cancels := make([]context.CancelFunc, len(waits))
		for i, w := range waits {
			evs = append(evs, event{at: w.arrive, i: i})
			if w.cancel > 0 {
				evs = append(evs, event{at: w.cancel, cancel: true, i: i})
			}
		}
		slices.SortStableFunc(evs, func(a, b event) int {
			if a.at != b.at {
				return int(a.at - b.at)
			}
			if a.cancel != b.cancel {
				if a.cancel {
					return 1
				}
				return -1
			}
			return a.i - b.i
		})
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, e := range evs {
			time.Sleep(e.at - time.Since(start))
			if e.cancel {
				cancels[e.i]()
				synctest.Wait()
				continue
			}
			ctx, cancel := context.WithCancel(t.Context())
			cancels[e.i] = cancel
			wg.Go(func() {
				err := k.WaitN(ctx, waits[e.i].n)
				mu.Lock()
				defer mu.Unlock()
				ends[e.i] = -1
				if err == nil {
					ends[e.i] = time.Since(start)
				}
			})
			synctest.Wait()
		}
		wg.Wait()
		for _, c := range cancels {
			if c != nil {
				c()
			}
		}
	})
	return ends
}

// refundCheck reports waits that went over the bucket (burst at 10/s) or
// out of arrival order.
func refundCheck(t *testing.T, burst int, waits []refundWait, ends []time.Duration) {
	t.Helper()
	var adm []admission
	last := time.Duration(-1)
	for i, e := range ends {
		if e < 0 {
			continue
		}
		adm = append(adm, admission{at: e, n: waits[i].n})
		if e < last {
			t.Errorf("wait %d (arrived %v) went at %v, before a wait that arrived earlier (at %v)", i, waits[i].arrive, e, last)
		}
		last = max(last, e)
	}
	if msg := overSent(adm, 10, burst); msg != "" {
		t.Errorf("%s; waits %v went at %v", msg, waits, ends)
	}
}

const tick = 100 * time.Millisecond // x/time/rate's d: one unit at 10/s

// TestRefundsXRatePorted: x/time/rate's own cancellation tests
// (rate_test.go: TestCancelLast, TestCancelTooLate, TestCancel0Tokens,
// TestCancel1Token, TestCancelMulti, TestWaitCancel), ported to waits on
// a Limiter key at 10/s: reservations are waits, and
// CancelAt is a context cancelled at that time. Where x/time/rate loses
// the units of a cancelled reservation that others follow, a Limiter
// gives them back exactly: the waits behind move up (so the times differ
// from x/time/rate's where it loses units), and nothing goes over the
// bucket.
func TestRefundsXRatePorted(t *testing.T) {
	tests := []struct {
		name  string
		burst int
		waits []refundWait
		want  []time.Duration // -1: did not go
	}{{
		name:  "CancelLast",
		burst: 2,
		waits: []refundWait{{0, 2, 0}, {0, 2, tick}, {tick, 2, 0}},
		want:  []time.Duration{0, -1, 2 * tick},
	}, {
		name:  "CancelTooLate",
		burst: 2,
		waits: []refundWait{{0, 2, 0}, {0, 2, 3 * tick}, {3 * tick, 2, 0}},
		want:  []time.Duration{0, 2 * tick, 4 * tick},
	}, {
		// x/time/rate gets 0 tokens back (the last wait at t3); here the
		// cancelled unit is reused by the wait behind it.
		name:  "Cancel0Tokens",
		burst: 2,
		waits: []refundWait{{0, 2, 0}, {0, 1, 1}, {0, 1, 0}, {0, 1, 0}},
		want:  []time.Duration{0, -1, tick, 2 * tick},
	}, {
		// x/time/rate gets 1 token back (the last wait at t4).
		name:  "Cancel1Token",
		burst: 2,
		waits: []refundWait{{0, 2, 0}, {0, 2, 2*tick - 1}, {0, 1, 0}, {2 * tick, 2, 0}},
		want:  []time.Duration{0, -1, 2*tick - 1, 3 * tick},
	}, {
		// x/time/rate: the wait of 1 stays at t4 and the last at t5.
		name:  "CancelMulti",
		burst: 4,
		waits: []refundWait{{0, 4, 0}, {0, 3, tick}, {0, 1, 0}, {0, 1, tick}, {tick, 3, 0}},
		want:  []time.Duration{0, -1, tick, -1, 4 * tick},
	}, {
		name:  "WaitCancel",
		burst: 3,
		waits: []refundWait{{0, 2, 0}, {0, 3, tick}, {tick, 2, 0}},
		want:  []time.Duration{0, -1, tick},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ends := refundRun(t, tt.burst, tt.waits)
			if !slices.Equal(ends, tt.want) {
				t.Errorf("waits went at %v; want %v", ends, tt.want)
			}
			refundCheck(t, tt.burst, tt.waits, ends)
		})
	}
}

// TestRandomRefunds: 400 scenarios
// of waits (1 to burst units) arriving over a second at 10/s, a third of
// them cancelled a little later, never send more than the bucket allows
// (a GCRA replay of what went) and serve the rest in arrival order.
func TestRandomRefunds(t *testing.T) {
	bad := 0
	for seed := range uint64(400) {
		r := rand.New(rand.NewPCG(seed, 8))
		burst := 1 + r.IntN(4)
		var waits []refundWait
		at := time.Duration(0)
		for range 3 + r.IntN(10) {
			at += time.Duration(r.IntN(4)) * 10 * time.Millisecond
			w := refundWait{arrive: at, n: 1 + r.IntN(burst)}
			if r.IntN(3) == 0 {
				w.cancel = at + time.Duration(1+r.IntN(30))*10*time.Millisecond
			}
			waits = append(waits, w)
		}
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			ends := refundRun(t, burst, waits)
			refundCheck(t, burst, waits, ends)
			if t.Failed() {
				bad++
			}
		})
	}
	if bad > 0 {
		t.Errorf("%d of 400 scenarios over-sent or broke arrival order", bad)
	}
}
