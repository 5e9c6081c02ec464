//go:build race

package distributed

// raceEnabled: the tests run under the race detector, which slows a
// process several times (see TestLeaseFleet).
const raceEnabled = true
