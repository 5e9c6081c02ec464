package distributed

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/throttle-go/throttle"
	"golang.org/x/time/rate"
)

// TestLimitsCancelRedis checks that a wait cancelled in the middle of the
// queue gives its units back on every limit: the wait behind it takes
// its turn. bytes 10/s burst 3: A takes 3 at once; B (300 ms) is
// cancelled at 50 ms; C, queued at 600 ms behind B, goes at 300 ms.
func TestLimitsCancelRedis(t *testing.T) {
	_, c := startRedis(t)
	q := New(c, "limits-cancel", 1000, 10)
	q.Limits = []throttle.UnitLimit{{Unit: "bytes", Rate: throttle.Rate{Limit: 10, Burst: 3}}}
	q.Timeout = time.Second
	defer q.Close()
	w := q.For("k").(throttle.CostWaiter)
	bytes3 := throttle.Cost{Units: []throttle.UnitCost{{Unit: "bytes", N: 3}}}
	start := time.Now()
	if err := w.WaitCost(t.Context(), bytes3); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var errB, errC error
	var atC time.Duration
	wg.Go(func() { errB = w.WaitCost(ctx, bytes3) })
	time.Sleep(10 * time.Millisecond)
	wg.Go(func() { errC = w.WaitCost(t.Context(), bytes3); atC = time.Since(start) })
	time.Sleep(40 * time.Millisecond)
	cancel()
	wg.Wait()
	if errB == nil || errC != nil || atC < 290*time.Millisecond || atC > 360*time.Millisecond {
		t.Errorf("B: %v; C: %v at %v; want context.Canceled; nil at about 300ms", errB, errC, atC)
	}
}

// TestLimitsMismatch checks that processes naming one quota with other
// Limits are refused with an error matching ErrConfigMismatch, not
// mixed, unless their Version is higher: then they replace them.
func TestLimitsMismatch(t *testing.T) {
	_, c := startRedis(t)
	newQ := func(tokens rate.Limit, version int) *Quota {
		q := New(c, "limits-mismatch", 1000, 10)
		q.Limits = []throttle.UnitLimit{{Unit: "tokens", Rate: throttle.Rate{Limit: tokens, Burst: 100}}}
		q.Timeout, q.Version, q.MaxLease = time.Second, version, 1
		t.Cleanup(func() { q.Close() })
		return q
	}
	tok := throttle.Cost{Units: []throttle.UnitCost{{Unit: "tokens", N: 1}}}
	a, b, b1 := newQ(100, 0), newQ(50, 0), newQ(50, 1)
	// A queued wait keeps the key's state (a full bucket is forgotten).
	if err := a.WaitCost(t.Context(), throttle.Cost{Units: []throttle.UnitCost{{Unit: "tokens", N: 100}}}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		q    *Quota
		want error
	}{
		{"same limits", a, nil},
		{"other limits", b, ErrConfigMismatch},
		{"other limits, higher version", b1, nil},
		{"the first, now a lower version", a, ErrConfigMismatch},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		err := tt.q.WaitCost(ctx, tok)
		cancel()
		if !errors.Is(err, tt.want) && !(tt.want == nil && errors.Is(err, throttle.ErrWouldExceedDeadline)) {
			t.Errorf("%s: WaitCost = %v; want %v", tt.name, err, tt.want)
		}
	}
}
