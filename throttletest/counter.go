package throttletest

import (
	"slices"
	"sync"
	"time"
)

// WorkerHeader is the request header whose value a server counts admissions
// by (see [Counter.PerWorker]): a test running several clients, or several
// processes of a fleet, sets it to tell them apart.
const WorkerHeader = "Throttletest-Worker"

// Stats is what a server saw, as numbers.
type Stats struct {
	Arrivals int   // requests received
	Admitted int   // requests the rule let through
	Rejected int   // requests refused (429, 503 or 403)
	Units    int64 // units admitted: requests, or tokens for [OpenAI]
}

// Counter records what a server saw: every arrival, and the time of every
// admission, read from the server's own clock. Every server of this
// package embeds one. Its methods are safe for concurrent use, also while
// the server serves; the zero Counter is empty and ready.
//
// It keeps every admission's time (16 bytes each), so a server admitting
// millions of requests holds megabytes: it is a test tool.
type Counter struct {
	mu       sync.Mutex     // protects the fields below
	stats    Stats          //
	admitted []time.Time    // in the order the rule decided, so non-decreasing
	workers  map[string]int // admissions per WorkerHeader value
}

// record counts one decision taken at now. The server calls it under the
// lock that serialises its decisions, so admitted stays in time order.
func (c *Counter) record(now time.Time, worker string, ok bool, units int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recordLocked(now, worker, ok, units)
}

// recordLocked is record with c.mu held, for a caller that reads the time
// under it so that admissions stay in time order.
func (c *Counter) recordLocked(now time.Time, worker string, ok bool, units int64) {
	c.stats.Arrivals++
	if !ok {
		c.stats.Rejected++
		return
	}
	c.stats.Admitted++
	c.stats.Units += units
	c.admitted = append(c.admitted, now)
	if worker != "" {
		if c.workers == nil {
			c.workers = make(map[string]int)
		}
		c.workers[worker]++
	}
}

// Stats returns the counts so far.
func (c *Counter) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// Admissions returns the time of every admission so far, oldest first.
func (c *Counter) Admissions() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.admitted)
}

// MaxIn returns the most admissions in any interval [t, t+d), and the
// start of the first such interval: the number to hold against a rule that
// allows at most q per d. It is 0 and the zero time when nothing was
// admitted or d ≤ 0.
func (c *Counter) MaxIn(d time.Duration) (most int, from time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d <= 0 {
		return 0, time.Time{}
	}
	j := 0
	for i, t := range c.admitted {
		for !c.admitted[j].Add(d).After(t) {
			j++
		}
		if n := i - j + 1; n > most {
			most, from = n, c.admitted[j]
		}
	}
	return most, from
}

// PerWindow returns the admissions in each window [origin+k·w,
// origin+(k+1)·w), k = 0, 1, …, up to the window of the last admission.
// Admissions before origin are not counted. It is nil when w ≤ 0.
func (c *Counter) PerWindow(origin time.Time, w time.Duration) []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w <= 0 {
		return nil
	}
	var out []int
	for _, t := range c.admitted {
		if t.Before(origin) {
			continue
		}
		k := int(t.Sub(origin) / w)
		for len(out) <= k {
			out = append(out, 0)
		}
		out[k]++
	}
	return out
}

// PerWorker returns the admissions of each value of [WorkerHeader] the
// requests carried; requests without it are not counted here.
func (c *Counter) PerWorker() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.workers))
	for k, v := range c.workers {
		out[k] = v
	}
	return out
}
