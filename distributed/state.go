package distributed

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/throttle-go/throttle"
	"golang.org/x/time/rate"
)

// State implements [throttle.Inspector]: one read-only script call returns
// the key's state as every process sees it (durations from Redis's clock
// at the call). It writes nothing: a key without state shows that of a
// new key and is not created, and no expiry moves. If Redis cannot
// answer, State returns an error matching [ErrStoreUnavailable], whatever
// the FailMode.
func (w *keyWaiter) State(ctx context.Context) (throttle.State, error) {
	at := time.Now()
	reply, err := w.run(ctx, "state")
	if err == nil && len(reply) != 12 {
		err = fmt.Errorf("unexpected reply %v from the schedule script", reply)
	}
	if err != nil {
		if errCaller(ctx, err) {
			return throttle.State{}, err
		}
		return throttle.State{}, fmt.Errorf("reading the state of %q: %w", w.key, unavailable(err))
	}
	const big = 1 << 53 // the script's +Inf
	fixed := func(x int64, scale float64) float64 {
		if x == big {
			return math.Inf(1)
		}
		return float64(x) / scale
	}
	st := throttle.State{
		At:        at,
		Tokens:    fixed(reply[0], 1e6),
		Remaining: fixed(reply[1], 1),
		Next:      usDuration(reply[2]),
		Paused:    usDuration(reply[3]),
		Queued:    reply[4],
		Limit:     rate.Inf,
		Burst:     fixed(reply[6], 1e6),
		Cut:       reply[7] == 1,
	}
	if reply[5] > 0 {
		st.Limit = rate.Limit(float64(reply[5]) / 1e6)
	}
	if reply[8] == 1 {
		st.Window, st.WindowLeft, st.WindowReset = true, fixed(reply[9], 1e6), usDuration(reply[10])
	}
	return st, nil
}

// State returns the state of the quota's own bucket (the one For("")
// returns): see [throttle.Inspector] and For.
func (q *Quota) State(ctx context.Context) (throttle.State, error) {
	return q.defaultWaiter().State(ctx)
}

var _ throttle.Inspector = (*keyWaiter)(nil)
