package distributed

import (
	"sync"
	"time"
)

// The breaker's fixed settings. An outage costs each Limiter at most
// breakerThreshold calls that pay the timeout, then one probe per
// breakerCooldown; everything else goes straight to the fail mode, and the
// first probe after Redis is back closes the breaker again.
const (
	breakerThreshold = 3                      // consecutive failures that open it
	breakerCooldown  = 250 * time.Millisecond // time between probes while open
)

// breaker keeps an outage from charging every wait the store timeout. Its
// methods are safe for concurrent use; the zero value is closed.
type breaker struct {
	mu       sync.Mutex // protects the fields below
	failures int        // consecutive store failures
	retryAt  time.Time  // while open: when the next probe may go
	probing  bool       // while open: a probe is in flight
}

// outcome is what a store call that allow let through came to.
type outcome int

const (
	succeeded outcome = iota // the store answered
	failed                   // the store failed or timed out
	abandoned                // the caller's context ended first: says nothing about the store
)

// allow reports whether a call may go to the store now, and whether it is
// the probe of an open breaker. Every call allowed must be followed by one
// done with the same probe value.
func (b *breaker) allow(now time.Time) (ok, probe bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failures < breakerThreshold {
		return true, false
	}
	if b.probing || now.Before(b.retryAt) {
		return false, false
	}
	b.probing = true
	return true, true
}

// change is what a call's outcome did to the breaker.
type change int

const (
	unchanged change = iota
	opened           // the failure that reached breakerThreshold: waits go to the fail mode
	recovered        // a success after failures that had not opened it
	closed           // a success (a probe) that closed an open breaker
)

// done records the outcome of a call allow let through and reports the
// change it made: a success after failures means the store is back
// (recovered, or closed if the breaker was open).
func (b *breaker) done(now time.Time, probe bool, o outcome) change {
	b.mu.Lock()
	defer b.mu.Unlock()
	if probe {
		b.probing = false
	}
	switch o {
	case succeeded:
		c := unchanged
		switch {
		case b.failures >= breakerThreshold:
			c = closed
		case b.failures > 0:
			c = recovered
		}
		b.failures = 0
		return c
	case failed:
		b.failures++
		if b.failures >= breakerThreshold {
			b.retryAt = now.Add(breakerCooldown)
		}
		if b.failures == breakerThreshold {
			return opened
		}
	}
	return unchanged
}

// state reports the consecutive failures and whether the breaker is open.
func (b *breaker) state() (failures int, open bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.failures, b.failures >= breakerThreshold
}
