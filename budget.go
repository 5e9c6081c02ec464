package throttle

import (
	"sync"
	"time"
)

// retryBudget keeps retries to a fraction of recent requests, in the manner
// of Finagle's RetryBudget and gRPC's retry throttling: a retry storm
// against a failing upstream multiplies its load by at most 1 + ratio.
//
// Counts are kept per second over the last budgetSlots seconds. The zero
// value is ready to use; it is safe for concurrent use.
type retryBudget struct {
	mu    sync.Mutex // protects the fields below
	start time.Time  // time zero of the slots; set at first use
	slots [budgetSlots]budgetSlot
}

type budgetSlot struct {
	sec               int64 // the second this slot counts, since start
	requests, retries int
}

const (
	budgetSlots = 10 // seconds of history
	budgetFloor = 10 // retries always allowed per budgetSlots seconds
)

// slot returns the slot of the current second, cleared if it held an
// older second. It requires b.mu.
func (b *retryBudget) slot(now time.Time) *budgetSlot {
	if b.start.IsZero() {
		b.start = now
	}
	sec := int64(now.Sub(b.start) / time.Second)
	s := &b.slots[sec%budgetSlots]
	if s.sec != sec {
		*s = budgetSlot{sec: sec}
	}
	return s
}

// request counts a first attempt.
func (b *retryBudget) request(now time.Time) {
	b.mu.Lock()
	b.slot(now).requests++
	b.mu.Unlock()
}

// retry reports whether one more retry fits in the budget with the given
// ratio, and if so counts it.
func (b *retryBudget) retry(now time.Time, ratio float64) bool {
	if ratio < 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	cur := b.slot(now)
	requests, retries := 0, 0
	for i := range b.slots {
		if s := &b.slots[i]; s.sec > cur.sec-budgetSlots {
			requests += s.requests
			retries += s.retries
		}
	}
	if float64(retries) >= ratio*float64(requests)+budgetFloor {
		return false
	}
	cur.retries++
	return true
}
