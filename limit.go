package throttle

import (
	"fmt"
	"math"
	"time"

	"golang.org/x/time/rate"
)

// Limit is one limit of a key, in one unit: a token bucket (Rate and
// Burst) or a window (Count per Per), as APIs state them:
//
//	throttle.Limit{Rate: 10, Burst: 10}                               // 10 a second, 10 at once
//	throttle.Limit{Count: 100, Per: time.Minute, Kind: throttle.Sliding} // 100 a minute, sliding
//	throttle.Limit{Unit: "tokens", Count: 30000, Per: time.Minute}    // a second unit
//
// A token bucket lets Rate units a second through on average and at most
// Burst at once (x/time/rate's unit: rate.Every(time.Minute/60) and
// rate.Inf work as there; Burst 0 is 1; Rate 0 with a Burst lets Burst
// units through, then none). Over any interval t it lets at most
// Burst + Rate·t through, so a bucket of 100 a minute, 100 at once,
// lets nearly 200 through in its first minute; a window of 100 a minute
// lets 100.
//
// A window lets Count units through per Per, counted as Kind says. A
// Limit with both a Rate and a Per is both limits. The zero Limit is no
// limit.
type Limit struct {
	// Unit is the unit the limit counts: "" for the unit of the first
	// limit (what WaitN counts: requests, for a Transport); another name
	// for a further limit, which a [Cost] names in its Units.
	Unit string

	// Rate and Burst make the limit a token bucket.
	Rate  rate.Limit
	Burst int

	// Count and Per make it a window of Count units per Per, counted as
	// Kind says.
	Count int
	Per   time.Duration
	Kind  WindowKind
}

// WindowKind is how a window counts, as servers count "100 a minute".
type WindowKind int

const (
	// Fixed windows, aligned to the Unix epoch: each window's units,
	// whatever came in the one before (2·Count may go across a
	// boundary).
	Fixed WindowKind = iota
	// Sliding is the sliding window counter: a window's units and those
	// of the one before weighted by the share of it still inside the
	// last Per (prev·(1 − f) + cur), as most rate-limit middleware
	// estimates it.
	Sliding
	// SlidingLog is exact: at most Count units in any interval of length
	// Per. The key keeps the time of each turn still inside the last Per,
	// so Count may be at most [MaxLogCount].
	SlidingLog
	// FromFirstUse windows start at the first units that go once the one
	// before ended (the key's first, or the first after a quiet spell),
	// as servers count "100 a minute from your first request".
	FromFirstUse
)

// MaxLogCount is the largest Count of a [SlidingLog] window.
const MaxLogCount = 1000

// String returns the kind's name: "fixed", "sliding", "sliding-log",
// "from-first-use".
func (k WindowKind) String() string {
	switch k {
	case Fixed:
		return "fixed"
	case Sliding:
		return "sliding"
	case SlidingLog:
		return "sliding-log"
	case FromFirstUse:
		return "from-first-use"
	}
	return fmt.Sprintf("WindowKind(%d)", int(k))
}

// bucket reports whether l has a token bucket.
func (l Limit) bucket() bool {
	return l.Rate != 0 || l.Burst != 0
}

// window reports whether l has a window.
func (l Limit) window() bool { return l.Per != 0 || l.Count != 0 }

// check returns an error for a limit no wait can use.
func (l Limit) check() error {
	switch {
	case l.Rate < 0 || l.Burst < 0 || math.IsNaN(float64(l.Rate)):
		return fmt.Errorf("throttle: limit %v has rate %v, burst %d: give a rate ≥ 0 (rate.Inf: none) and a burst ≥ 0: %w", l, l.Rate, l.Burst, ErrInvalidLimit)
	case l.window() && (l.Per <= 0 || l.Count < 1):
		return fmt.Errorf("throttle: limit %v has a window of %d per %v: give a count ≥ 1 and a period > 0: %w", l, l.Count, l.Per, ErrInvalidLimit)
	case l.window() && (l.Kind < Fixed || l.Kind > FromFirstUse):
		return fmt.Errorf("throttle: limit %v has window kind %v: %w", l, l.Kind, ErrInvalidLimit)
	case l.window() && l.Kind == SlidingLog && l.Count > MaxLogCount:
		return fmt.Errorf("throttle: limit %v is a sliding log of %d per %v, more than MaxLogCount (%d) times a key keeps: use Sliding for counts this large: %w", l, l.Count, l.Per, MaxLogCount, ErrInvalidLimit)
	}
	return nil
}

// String returns the limit as a literal would state it, e.g. "10/s burst
// 10", "100 per 1m0s sliding", "30000 tokens per 1m0s".
func (l Limit) String() string {
	unit := ""
	if l.Unit != "" {
		unit = " " + l.Unit
	}
	s := ""
	if l.bucket() {
		s = fmt.Sprintf("%v%s/s burst %d", float64(l.Rate), unit, l.Burst)
	}
	if l.window() {
		if s != "" {
			s += " and "
		}
		s += fmt.Sprintf("%d%s per %v", l.Count, unit, l.Per)
		if l.Kind != Fixed {
			s += " " + l.Kind.String()
		}
	}
	if s == "" {
		return "no limit"
	}
	return s
}
