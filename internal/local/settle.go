package local

// Settle amends a wait that spent spent units of the first limit to
// actual, and the further limits by d (actual − spent in each; nil:
// none): the queued turns move at once (see the engine's Settle).
func (k *Key) Settle(spent, actual int, d []float64) error {
	k = k.lock()
	defer k.mu.Unlock()
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
	moved := k.s.Settle(now, k.pacing, float64(spent), float64(actual))
	if d != nil && k.s.SettleLimits(now, d) {
		moved = true
	}
	if moved {
		k.notifyLocked()
	}
	return nil
}
