package local

// Settle amends a wait that spent spent units of the first limit to
// actual, and the further limits by d (actual − spent in each; nil:
// none): the queued turns move at once (see the engine's Settle). A
// charge past what a limit holds at once is dropped (the engine's Clamp),
// and to is told of it.
func (k *Key) Settle(spent, actual int, d []float64, to Listener) error {
	k = k.lock()
	var ds []Decision
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
	k.advanceLocked(now)
	a, dropped := k.s.Clamp(k.pacing, float64(spent), float64(actual))
	if dropped > 0 && to.Emit != nil {
		ds = append(ds, Decision{Kind: Clamp, Limit: -1, Units: dropped})
	}
	if d != nil {
		for i, x := range k.s.ClampLimits(d) {
			if x > 0 && to.Emit != nil {
				ds = append(ds, Decision{Kind: Clamp, Limit: i, Units: x})
			}
		}
	}
	moved := k.s.Settle(now, k.pacing, float64(spent), a)
	if d != nil && k.s.SettleLimits(now, d) {
		moved = true
	}
	if moved {
		k.notifyLocked()
	}
	return nil
}
