package measure

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/throttle-go/throttle"
)

// Events tallies a Transport's events by kind, and give-ups by reason:
// what the library decided during a run. Set a Transport's OnEvent to
// Record. The zero Events is ready; it is safe for concurrent use.
type Events struct {
	mu     sync.Mutex     // protects the maps
	kinds  map[string]int // by kind name
	giveUp map[string]int // by reason
}

// Record counts e.
func (s *Events) Record(e throttle.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kinds == nil {
		s.kinds, s.giveUp = make(map[string]int), make(map[string]int)
	}
	s.kinds[e.Kind.String()]++
	if e.Kind == throttle.EventGiveUp {
		s.giveUp[e.Reason]++
	}
}

// String lists the counts, kinds then give-up reasons, in a stable order:
// "pause 12, retry 30, wait 400; gave up: retry budget spent 3".
func (s *Events) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := join(s.kinds)
	if len(s.giveUp) > 0 {
		out += "; gave up: " + join(s.giveUp)
	}
	return out
}

func join(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
