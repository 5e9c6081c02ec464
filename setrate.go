package throttle

import (
	"fmt"
	"math"

	"github.com/throttle-go/throttle/internal/schedule"
	"golang.org/x/time/rate"
)

// SetRate changes key's rate while the Limiter runs: the waits queued on
// the key go at the new pace from now on (their turns follow from the
// key's state, so a change of pace moves them all at once), and the
// bucket keeps the units it holds now, up to the new burst (as a change
// of pace by a server's declared limit does). A key seen later, or seen
// again after it was forgotten, gets the new rate too: SetRate is an
// override that lasts, as an entry of Overrides would. The key "" is the
// Limiter's own quota (WaitN on the Limiter), and For("").
//
// r's zero fields mean what they mean in [Rate]: the zero Rate is no
// limit, Limit 0 with a Burst lets no more through than the bucket holds,
// Burst 0 with a Limit is 1. A wait queued for more units than the new burst fails
// with [ErrCostExceedsBurst] only when it is made, not once queued: it
// goes when the bucket has gathered its units. A negative or NaN Limit,
// or a negative Burst, is refused with [ErrInvalidLimit] and changes
// nothing. SetRate never blocks on a wait and is safe for concurrent use.
func (l *Limiter) SetRate(key string, r Rate) error {
	if r.Limit < 0 || math.IsNaN(float64(r.Limit)) || r.Burst < 0 {
		return fmt.Errorf("throttle: SetRate(%q) with limit %v, burst %d: give a limit ≥ 0 (rate.Inf: none) and a burst ≥ 0: %w", key, r.Limit, r.Burst, ErrInvalidLimit)
	}
	l.once.Do(l.init)
	l.insertMu.Lock()
	l.rates[key] = r
	l.insertMu.Unlock()
	bs := []*bucket{}
	if v, ok := l.keys.Load(key); ok {
		bs = append(bs, v.(*bucket))
	}
	if key == "" {
		bs = append(bs, l.def)
	}
	for _, b := range bs {
		b.mu.Lock()
		if !b.dead {
			now := l.now()
			b.advanceLocked(now) // what went at the old pace
			b.s.Repace(now, b.pacing)
			b.setRate(r)
			b.advanceLocked(now) // rescale: the units kept at the new
			b.notifyLocked()
		}
		b.mu.Unlock()
	}
	return nil
}

// setRate sets the key's rate. It requires b.mu, or b not yet shared.
func (b *bucket) setRate(r Rate) {
	b.limit, b.burst = r.Limit, r.Burst
	if b.limit == 0 && b.burst == 0 {
		b.limit = rate.Inf // the zero Rate: no limit
	}
	if b.burst == 0 {
		b.burst = 1
	}
	b.pacing = schedule.Config{Burst: float64(b.burst), Sec: 1e9}
	if b.limit != rate.Inf && b.limit >= 0 {
		// Limit 0 (x/time/rate's: the bucket never refills) and rates
		// too slow for a float's interval are paced at neverInterval.
		b.pacing.Interval = min(1e9/float64(b.limit), neverInterval)
	}
}

// neverInterval is the pace, in ns per unit, of a bucket that does not
// refill (Limit 0): one unit per 3e233 years. It is finite, so that the
// schedule's arithmetic (p·interval − τ for any position p and burst)
// stays finite and exact where it matters: a position within the bucket
// goes now, one past it never does.
const neverInterval = 1e250
