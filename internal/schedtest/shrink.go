package schedtest

// Shrink returns a shorter sequence that still fails: it drops ops one at
// a time (the others keep their offsets) while fails reports true, until
// no single op can go. fails runs a sequence and reports whether it
// violates an invariant; in a bubble it is cheap, so a failing seed is
// reported as the few ops that matter.
func Shrink(seq Sequence, fails func(Sequence) bool) Sequence {
	for {
		shrunk := false
		for i := len(seq.Ops) - 1; i >= 0; i-- {
			try := seq
			try.Ops = append(append([]Op(nil), seq.Ops[:i]...), seq.Ops[i+1:]...)
			if fails(try) {
				seq, shrunk = try, true
			}
		}
		if !shrunk {
			return seq
		}
	}
}
