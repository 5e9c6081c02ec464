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
// the waiters For returns implement [throttle.Adapter] and
// [throttle.Pauser], so [throttle.Transport] uses it as it would the
// in-process limiter, and what one worker's responses say paces the whole
// fleet:
//
//	client := &http.Client{Transport: &throttle.Transport{Waiter: q}}
//
// # Fleet-wide pacing
//
// Transport reads every response's rate-limit headers into a
// [throttle.Feedback] and hands it to the key's waiter (Adapt): one more
// script call per response that says something, none for one that says
// nothing. The script writes it into the bucket's hash, where every
// worker's next wait sees it:
//
//   - A pause (Retry-After, or a spent quota's reset): no worker's turn
//     comes before it.
//   - A window (remaining units until a reset): every reservation of every
//     worker spends from it, so requests in flight count before their
//     responses arrive. A spent window holds every wait until its reset;
//     then one wait goes as a probe, and the rest wait for its response
//     (waits of the process that gets it wake at once; the others look
//     again when it is due, two round trips after it left, and otherwise
//     at its 1 s timeout). A window running low (under a tenth of its size, or 10
//     units) is spread: at most remaining/(time to reset) per second.
//   - A bare rejection (429 or 503 that says nothing of when): the fleet's
//     pace is cut to 0.7 times the rate it was sending at over the last
//     second, and regrows along a cubic curve, back to that rate after 1 s
//     and 30% beyond it 3 s later, never above the configured limit (AWS's
//     adaptive retry mode; see throttle's Adapter). A lone rejection first
//     shifts the schedule by two intervals; a second within 10 s cuts.
//     Rejections of requests that reserved their turns before the last cut
//     are ignored.
//
// A server's declared limit (Feedback.HasDeclared) is not used: a Quota
// always has a configured limit, and a declared one applies only where
// none is configured. The window and the cut pace the fleet below it.
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
//     now+d" where every process's next wait sees it, and pushes it to
//     the waits already sleeping on their turns in every process (see
//     Pauses below); Adapt does the same for a pause, a window and an
//     adaptive cut.
//   - One Redis hash per bucket, expiring once the bucket is full again,
//     any pause is over, no window or cut needs remembering, and no unit
//     was reserved for 2 s (the reach of the count an adaptive cut and a
//     first window read);
//     the key's text is encoded, so any user key is safe and all of a
//     bucket's state stays in one Cluster slot.
//   - When Redis cannot answer within [Quota.Timeout], the [FailMode]
//     decides; a breaker keeps an outage from charging every wait the
//     timeout, and recovery is automatic.
//
// # Pauses
//
// A pause (Pause, or Adapt with a Retry-After) stops the whole fleet,
// including turns handed out before it: "one worker gets 429 with
// Retry-After: 2; no worker sends for 2 s". The script that writes a new
// or longer pause, from start (now, or the end of the pause it extends)
// to its end, moves the queue's end back by the pause's length, so later
// reservations come after the turns it moves, and PUBLISHes
// "now start end key" (µs of Redis's clock) on the quota's channel,
// Prefix + "pause." + base64url(name). In Cluster a PUBLISH reaches every
// node. A wait sleeping on a turn it reserved before the pause, at or
// after start, moves its wake by end − start: every turn keeps its
// spacing and none comes before the end. It computes this from Redis's µs
// and its own timer only, never comparing clocks.
//
// The subscription costs no command per wait: each process subscribes
// (one connection, one goroutine per Quota) when its first wait starts a
// sleep of 10ms or more, and ends it when the last such wait ends; a busy
// quota stays subscribed. What that leaves out, each bounded:
//
//   - A wait whose turn comes before the message reaches it (about when
//     Pause returns to its caller, one round trip after it was sent) goes;
//     so does one that sleeps less than 10ms.
//   - A sleeper that starts the subscription does not see a pause
//     published before the subscription is active, one round trip later.
//   - If Redis is down or the subscription fails, waits are unaffected,
//     they only miss pushed pauses until it is back (retried every
//     250ms). On a Ring, a channel lives on one shard: only pauses of keys
//     on that shard are pushed.
//
// # Redis keys
//
// A bucket lives at Prefix + "{" + base64url(name) + "." + base64url(key)
// + "}" (Prefix defaults to "throttle:"), a hash with fields t (the time
// the bucket is full again, µs of Redis's clock), p (paused until), and,
// once servers said something, the window (wr, wz, wl, ws, wp), the cut
// (am, ac, al), a per-second count of reserved units (cs, cc, cp) and how
// long all of it must be kept (x); reserve.lua describes them.
package distributed
