package local

import "github.com/throttle-go/throttle/internal/schedule"

// Settle amends a wait that spent spent units of the first limit to
// actual, and the further limits by d (actual − spent in each; nil:
// none): the queued turns move at once (see the engine's Settle). A
// charge past what a limit holds at once is dropped (the engine's Clamp),
// and to is told of it.
func (k *Key) Settle(spent, actual int, d []float64, to Listener) error {
	k = k.lock()
	var ds []Decided
	defer func() {
		k.mu.Unlock()
		to.emit(ds)
	}()
	if spent < 0 || actual < 0 {
		return errorf(ErrInvalid, "settle %d units of %q as %d: costs are never negative", spent, k.key, actual)
	}
	if err := k.check(spent); err != nil {
		return err
	}
	if spent == actual && d == nil {
		return nil
	}
	now := k.ks.Now()
	r := k.s.Apply(now, k.pacing, schedule.Settle{Spent: float64(spent), Actual: float64(actual), Diff: d})
	for i, x := range r.Dropped {
		if x > 0 && to.Emit != nil {
			ds = append(ds, Decided{Kind: Clamp, Limit: i - 1, Units: x})
		}
	}
	if r.Moved {
		k.notifyLocked()
	}
	return nil
}
