package distributed

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// ErrEvictable is returned (wrapped, naming the server and its settings)
// by [Limiter.Check] when Redis may evict the Limiter's state to make
// room.
var ErrEvictable = errors.New("throttle/distributed: Redis may evict the limiter's state")

// Check reports first a configuration no wait can use (its limits, its
// Version: an error matching [throttle.ErrInvalidLimit], as each call
// would return), then asks the Redis that the Limiter uses (every master of a Cluster,
// every shard of a Ring) whether it may evict the Limiter's state, and
// returns an error matching [ErrEvictable] if it may: its
// maxmemory-policy is allkeys-* (any key may go) or volatile-* (keys
// with a TTL may go, and the Limiter's keys have one: idle state expires).
// An evicted state comes back as a full bucket, so the fleet sends a
// burst more than its limit each time; a cache that evicts under memory
// pressure can do so many times a second. Only noeviction keeps the
// state; the package doc says which settings to use. Programs call Check
// once at start and log or refuse what it returns; waits do not call it.
//
// Where the server does not let a client read its configuration (CONFIG
// renamed or forbidden by an ACL, as on most managed Redis services),
// Check cannot tell and returns nil: check the provider's parameter
// group instead. If Redis cannot be reached, the error matches
// [ErrStoreUnavailable]. Check is bounded by ctx only.
func (q *Limiter) Check(ctx context.Context) error {
	if err := q.config().err; err != nil {
		return err // limits no wait can use: every call would fail with it
	}
	var (
		mu   sync.Mutex
		errs []error
	)
	check := func(ctx context.Context, c *redis.Client) error {
		err := checkNode(ctx, c)
		if err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
		return nil
	}
	var err error
	switch c := q.client.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, check)
	case *redis.Ring:
		err = c.ForEachShard(ctx, check)
	case *redis.Client:
		err = check(ctx, c)
	default:
		err = checkNode(ctx, named{c, "redis"})
	}
	if err != nil {
		errs = append(errs, unavailable(err))
	}
	return errors.Join(errs...)
}

// configGetter is what checkNode needs of a client.
type configGetter interface {
	ConfigGet(ctx context.Context, parameter string) *redis.MapStringStringCmd
	String() string
}

// named gives a client without a String method a name for errors.
type named struct {
	redis.UniversalClient
	name string
}

func (n named) String() string { return n.name }

// checkNode checks one server's eviction settings.
func checkNode(ctx context.Context, c configGetter) error {
	policy, err := configGet(ctx, c, "maxmemory-policy")
	if err != nil || policy == "" {
		return err
	}
	if !strings.HasPrefix(policy, "allkeys-") && !strings.HasPrefix(policy, "volatile-") {
		return nil // noeviction
	}
	maxmemory, err := configGet(ctx, c, "maxmemory")
	if err != nil {
		return err
	}
	limit := "no maxmemory set now, so nothing is evicted until one is"
	if maxmemory != "" && maxmemory != "0" {
		limit = "maxmemory " + maxmemory + " bytes"
	}
	return fmt.Errorf("%w: %s has maxmemory-policy %s (%s), which may evict the quota's keys (they have a TTL); each eviction lets a burst more through: set maxmemory-policy noeviction on the Redis that keeps quotas (a Redis of its own, not a shared cache)",
		ErrEvictable, c, policy, limit)
}

// configGet returns one CONFIG GET parameter, or "" (and no error) if the
// server refuses CONFIG: a Redis error reply (unknown or renamed command,
// NOPERM), as opposed to not reaching the server.
func configGet(ctx context.Context, c configGetter, name string) (string, error) {
	m, err := c.ConfigGet(ctx, name).Result()
	var re redis.Error
	switch {
	case errors.As(err, &re):
		return "", nil
	case err != nil:
		return "", unavailable(err)
	}
	return m[name], nil
}
