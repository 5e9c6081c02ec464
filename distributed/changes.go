package distributed

import (
	"sync"
	"sync/atomic"
)

// changes wakes this process's waits that are blocked on a spent server
// window when a response (through Adapt) tells a window that admits units
// again: the answer to the probe after a reset, above all. Without it they
// would sleep until the probe's timeout. Waits of other processes are not
// woken; they reserve again at the reset or the probe's timeout, as the
// script told them.
//
// It is per Quota, not per key: a change of one key's window wakes the
// blocked waits of every key of the Quota in this process, each of which
// costs one more script call. Few waits are blocked on a window at any
// time, and memory stays bounded however many keys there are.
type changes struct {
	gen atomic.Uint64 // incremented by every notify

	mu sync.Mutex    // protects ch and orders notify against wait
	ch chan struct{} // closed by the next notify; nil if no one waits
}

// wait returns a channel closed by the next notify, and the number of
// notifies so far: a caller that read gen before asking Redis compares the
// two to tell whether a change came in between.
func (c *changes) wait() (<-chan struct{}, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch == nil {
		c.ch = make(chan struct{})
	}
	return c.ch, c.gen.Load()
}

// notify wakes every wait blocked on a window.
func (c *changes) notify() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen.Add(1)
	if c.ch != nil {
		close(c.ch)
		c.ch = nil
	}
}
