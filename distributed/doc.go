// Package distributed is the Redis-backed waiter of throttle: one token
// bucket per quota, kept in Redis and shared by every process that names
// it, so fifty pods with one API key, or queue workers in several
// processes, stay together under one limit.
//
// It works with any go-redis v9 [redis.UniversalClient] — a single node,
// Cluster, Sentinel, Ring, or Valkey — and nothing else.
//
// # Use
//
// Build the same [Quota] in every process and wait before each unit of
// work:
//
//	q := distributed.New(client, "github-api", 100, 10) // 100/s, burst 10
//	q.Workers = 50                                      // pods, for FailLocal
//	err := q.For(apiKey).WaitN(ctx, 1)
//
// A [Quota] implements [throttle.Waiter] and [throttle.KeyedWaiter]; it and
// the waiters For returns implement [throttle.Pauser], so [throttle.Transport] uses
// it as it would the in-process limiter.
//
// # Guarantees
//
//   - One round trip per wait: a Lua script (EVALSHA, reloaded after
//     NOSCRIPT) reserves the turn using Redis's TIME and returns a relative
//     wait. Workers' clocks are never consulted, so clock skew between
//     them does not matter. Callers are served in the order they reach
//     Redis.
//   - A turn past ctx's deadline is refused by the script itself, at once,
//     and nothing is reserved; a wait cancelled during its sleep gives its
//     units back.
//   - [Quota.Pause] (and the Pause of a For waiter) writes "nothing before
//     now+d" where every process's next wait sees it.
//   - One Redis hash per bucket, expiring once the bucket is full again;
//     the key's text is encoded, so any user key is safe and all of a
//     bucket's state stays in one Cluster slot.
//   - When Redis cannot answer within [Quota.Timeout], the [FailMode]
//     decides; a breaker keeps an outage from charging every wait the
//     timeout, and recovery is automatic.
//
// # Redis keys
//
// A bucket lives at Prefix + "{" + base64url(name) + "." + base64url(key)
// + "}" (Prefix defaults to "throttle:"), a hash with fields t (the time
// the bucket is full again, µs of Redis's clock) and p (paused until).
package distributed
