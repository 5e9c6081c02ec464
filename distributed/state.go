package distributed

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/throttle-go/throttle"
	"golang.org/x/time/rate"
)

// State returns the key's state now, as every process sees it: see
// [throttle.State]. One read-only script call (two for a Limiter with
// further limits: the second reads them, for State.Limits) returns it,
// durations from Redis's clock at the call. It writes nothing: a key
// without state shows that of a new key and is not created, and no
// expiry moves. Declared is always false: a Limiter adopts no declared
// pace. If Redis cannot answer, State returns an error matching
// [ErrStoreUnavailable], whatever the FailMode.
func (w *keyWaiter) State(ctx context.Context) (throttle.State, error) {
	at := time.Now()
	reply, err := w.run(ctx, "state")
	if err == nil && len(reply) != rstateNow+1 {
		err = fmt.Errorf("unexpected reply %v from the schedule script", reply)
	}
	if err != nil {
		if errCaller(ctx, err) {
			return throttle.State{}, err
		}
		return throttle.State{}, fmt.Errorf("reading the state of %q: %w", w.key, unavailable(err))
	}
	st := throttle.State{
		At:               at,
		Tokens:           fixed(reply[rstateTokens], 1e6),
		Remaining:        fixed(reply[rstateRemaining], 1),
		Next:             usDuration(reply[rstateNext]),
		Paused:           usDuration(reply[rstateHold]),
		Queued:           reply[rstateQueued],
		QueuedCritical:   reply[rstateCritical],
		QueuedBackground: reply[rstateBackground],
		Rate:             rate.Inf,
		Burst:            fixed(reply[rstateBurst], 1e6),
		SlowedDown:       reply[rstateCut] == 1,
	}
	switch {
	case reply[rstateRate] > 0:
		st.Rate = rate.Limit(float64(reply[rstateRate]) / 1e6)
	case reply[rstateBurst] > 0:
		st.Rate = 0 // a bucket that does not refill (Rate 0)
	}
	if reply[rstateWindow] == 1 {
		st.Window = &throttle.ServerWindow{Remaining: fixed(reply[rstateWindowLeft], 1e6), Reset: usDuration(reply[rstateWindowReset])}
	}
	if st.Limits, err = w.limitStates(ctx); err != nil {
		return throttle.State{}, err
	}
	return st, nil
}

// fixed reads a scaled number of a state reply: x/scale, or +Inf for the
// script's 2^53.
func fixed(x int64, scale float64) float64 {
	if x == 1<<53 {
		return math.Inf(1)
	}
	return float64(x) / scale
}

// limitStates returns the state of the key's further limits now, in
// their order (a limit with both a Rate and a Per shows as two): each
// limit's units left once the waits queued have spent theirs. It is one
// script call (op mstate) that changes nothing; nil without further
// limits.
func (w *keyWaiter) limitStates(ctx context.Context) ([]throttle.LimitState, error) {
	x := w.q.xconfig()
	if x == nil {
		return nil, nil
	}
	// mstate reads the configuration only.
	reply, err := w.run(ctx, "mstate", stateArgs{Xspec: x.spec}.append(nil)...)
	if lerr := w.limitsError(err); lerr != nil {
		return nil, lerr
	}
	if err == nil && len(reply) != len(x.units)+1 {
		err = fmt.Errorf("unexpected reply %v from the schedule script", reply)
	}
	if err != nil {
		if errCaller(ctx, err) {
			return nil, err
		}
		return nil, fmt.Errorf("reading the limits of %q: %w", w.key, unavailable(err))
	}
	out := make([]throttle.LimitState, len(x.units))
	for i := range out {
		out[i] = throttle.LimitState{Unit: x.units[i], Window: x.window[i], Remaining: fixed(reply[i], 1e6)}
	}
	return out, nil
}
