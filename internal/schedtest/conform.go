package schedtest

import (
	"fmt"
	"slices"
	"time"
)

// Admission is n units that went at At, on any clock (e.g. the turns
// Redis gave, in µs of its clock, as a Duration since the epoch).
type Admission struct {
	At time.Duration
	N  int
}

// Conforms replays adm, in time order, through a bucket of limit units a
// second and burst (GCRA, the never-over invariant: at most burst +
// limit·T units in any interval of length T) and returns a line for every
// admission the bucket does not allow yet, by more than tol. It does not
// change adm.
func Conforms(adm []Admission, limit float64, burst int, tol time.Duration) []string {
	adm = slices.Clone(adm)
	slices.SortStableFunc(adm, func(a, b Admission) int { return int(a.At - b.At) })
	interval := float64(time.Second) / limit
	tau := float64(max(burst, 1)) * interval
	var bad []string
	tat := 0.0
	for _, a := range adm {
		// From the first: times since the epoch in ns are coarser than
		// a float64's µs.
		t, n := float64(a.At-adm[0].At), float64(a.N)
		if early := tat + n*interval - tau; t+float64(tol) < early {
			bad = append(bad, fmt.Sprintf("never over (%v/s burst %d): %d units at %v, %v before the bucket allows them",
				limit, burst, a.N, a.At, time.Duration(early-t)))
		}
		tat = max(tat, t) + n*interval
	}
	return bad
}

// MostIn returns the most units of adm in any window [t, t+d).
func MostIn(adm []Admission, d time.Duration) int {
	adm = slices.Clone(adm)
	slices.SortStableFunc(adm, func(a, b Admission) int { return int(a.At - b.At) })
	most, sum, j := 0, 0, 0
	for _, a := range adm {
		sum += a.N
		for a.At-adm[j].At >= d {
			sum -= adm[j].N
			j++
		}
		most = max(most, sum)
	}
	return most
}
