package distributed

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/throttle-go/throttle"
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
