package schedule

// Clamp bounds a settle's charge on the first limit: a wait that spent
// spent units cannot have cost more than spent and the bucket's burst
// (the most it holds at once beyond what the wait was admitted for), so
// one usage value, however large, owes at most a bucket's worth of debt.
// It returns actual as clamped and the units dropped. With no pace in
// force there is nothing to clamp (a settle amends nothing then).
func (s *State) Clamp(c Config, spent, actual float64) (clamped, dropped float64) {
	interval, burst := s.Base(c)
	if interval <= 0 || actual <= spent+burst {
		return actual, 0
	}
	return spent + burst, actual - (spent + burst)
}

// ClampLimits bounds the further limits' charges d (actual − spent, per
// limit) at what each limit holds at once (its burst, its window's
// count), in place. It returns the units dropped per limit, nil if none
// was.
func (s *State) ClampLimits(d []float64) (dropped []float64) {
	if s.x == nil {
		return nil
	}
	for i := range s.x.lim {
		if most := s.x.lim[i].Most(); d[i] > most {
			if dropped == nil {
				dropped = make([]float64, len(d))
			}
			dropped[i], d[i] = d[i]-most, most
		}
	}
	return dropped
}
