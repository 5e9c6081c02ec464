package sdktest

import (
	"net/http"
	"sort"
	"sync"
)

// CallHeader names a call across its attempts: a test sets it to a value
// unique to each call, and the fakes count the attempts of each value.
// Requests without it are counted by path.
const CallHeader = "X-Test-Call"

// calls counts the attempts of each call a fake received.
type calls struct {
	mu       sync.Mutex // protects attempts
	attempts map[string]int
}

func (c *calls) add(r *http.Request) {
	k := r.Header.Get(CallHeader)
	if k == "" {
		k = r.URL.Path
	}
	c.mu.Lock()
	if c.attempts == nil {
		c.attempts = make(map[string]int)
	}
	c.attempts[k]++
	c.mu.Unlock()
}

// Attempts returns how many requests each call sent, sorted from the
// fewest: one entry per call the fake received.
func (c *calls) Attempts() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]int, 0, len(c.attempts))
	for _, n := range c.attempts {
		out = append(out, n)
	}
	sort.Ints(out)
	return out
}
