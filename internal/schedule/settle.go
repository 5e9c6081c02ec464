package schedule

// Costs settled after the response: see "Settled costs" in schedule.go's
// doc, which states the rule; this is its Go side (the script's op
// settle is the other).

// Settle amends, at now and after advance, the cost of units that have
// gone: a wait that spent spent units really cost actual (both ≥ 0). It
// reports whether queued turns moved (either way), so that their
// sleepers ask again.
//
//   - The bucket: tat moves by (actual − spent)·interval at the pace in
//     force (a cut's, if one is), later for a charge (a debt the next
//     waits pay), earlier for a give-back, which then meets GCRA's floor
//     (floorTat): the bucket never holds more than its burst, however
//     much is given back. No pace in force: nothing to amend.
//   - The server's window: a charge spends from it (the server counted
//     the units; a charge past what is left delays the probes); a
//     give-back does not refill it, since the units may have been spent
//     in a window that is gone, and the server's next response tells
//     what is left.
//   - The units in flight (pending), the units counted as sent, the cut
//     and the trim are about the requests that went and their responses:
//     a Settle, which comes after the response, leaves them as they are.
func (s *State) Settle(now float64, c Config, spent, actual float64) bool {
	d := actual - spent
	if d == 0 {
		return false
	}
	s.x.moved(now)
	if d > 0 {
		s.win.spend(d, d, now)
	}
	interval, _ := s.Pace(now, c)
	if interval > 0 {
		// GCRA's max(tat, now) first: a bucket idle since tat has
		// refilled to its burst, no further, and the units are amended
		// from there (advance leaves tat as it is with nothing queued).
		s.FloorTat(now, c)
		s.tat += d * interval
		s.FloorTat(now, c)
	}
	return s.Queued() > 0
}
