package distributed

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/internal/redistest"
)

// TestCheck starts redis-server with each kind of eviction setting and
// checks what Limiter.Check says of it.
func TestCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		args      []string
		evictable bool
		says      string // in the error
	}{
		{name: "default noeviction"},
		{name: "allkeys-lru", args: []string{"--maxmemory-policy", "allkeys-lru"}, evictable: true, says: "maxmemory-policy allkeys-lru (no maxmemory set now"},
		{name: "volatile-lfu with maxmemory", args: []string{"--maxmemory", "100mb", "--maxmemory-policy", "volatile-lfu"}, evictable: true, says: "maxmemory-policy volatile-lfu (maxmemory 104857600 bytes)"},
		{name: "allkeys-random", args: []string{"--maxmemory-policy", "allkeys-random"}, evictable: true, says: "set maxmemory-policy noeviction"},
		// A managed Redis that hides CONFIG: Check cannot tell.
		{name: "CONFIG renamed", args: []string{"--maxmemory-policy", "allkeys-lru", "--rename-command", "CONFIG", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := redistest.StartWith(t, redistest.Options{Args: tt.args})
			q := New(newClient(t, s.Addr()), "check", throttle.Limit{Rate: 100, Burst: 10})
			err := q.Check(context.Background())
			if got := errors.Is(err, ErrEvictable); got != tt.evictable || (err != nil && !got) {
				t.Fatalf("Check() = %v; want ErrEvictable %v", err, tt.evictable)
			}
			if err != nil && (!strings.Contains(err.Error(), tt.says) || !strings.Contains(err.Error(), s.Addr())) {
				t.Errorf("Check() = %q; want it to name %s and say %q", err, s.Addr(), tt.says)
			}
		})
	}
	t.Run("unreachable", func(t *testing.T) {
		s := redistest.Start(t)
		s.Stop()
		q := New(newClient(t, s.Addr()), "check", throttle.Limit{Rate: 100, Burst: 10})
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := q.Check(ctx); !errors.Is(err, ErrStoreUnavailable) || errors.Is(err, ErrEvictable) {
			t.Errorf("Check() with Redis down = %v; want ErrStoreUnavailable", err)
		}
	})
}
