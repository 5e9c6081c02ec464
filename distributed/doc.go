// Package distributed is throttle's Limiter for a fleet: the same
// limits and the same [throttle.Quota] per key, kept in Redis and shared
// by every process that names it, so fifty pods with one API key, or
// queue workers in several processes, stay together under one limit.
//
// It works with any go-redis v9 [redis.UniversalClient] — a single node,
// Cluster, Sentinel, Ring, or Valkey — and nothing else.
//
// # Use
//
// Build the same [Limiter] in every process, with the limits a
// [throttle.Limiter] would have, and wait before each unit of work:
//
//	lim := distributed.New(client, "github-api", throttle.Limit{Rate: 100, Burst: 10})
//	lim.Workers = 50 // pods, for FailLocal
//	err := lim.For(apiKey).Wait(ctx)
//
// A [Limiter] is a [throttle.Quotas]: [throttle.Transport] uses it as it
// would the in-process Limiter, and what one worker's responses say
// paces the whole fleet:
//
//	client := &http.Client{Transport: &throttle.Transport{Waiter: lim}}
//
// Moving a program from one process to a fleet changes its constructor:
// every operation of a key (Wait, Try, Reserve, Settle, Acquire, Pause,
// Observe, State) is the [throttle.Quota] that For returns, with the
// guarantees stated there, for every process at once. What a
// [throttle.Limiter] has that a fleet does not: Overrides and
// InFlightOverrides (every key of a Limiter has its limits), SetRate
// (a running fleet changes its limits by Version), MaxKeys and Len (keys
// live in Redis and expire when idle), and a declared pace (see below).
//
// # Fleet-wide pacing
//
// Transport reads every response's rate-limit headers into a
// [throttle.Feedback] and hands it to the key's quota (Observe): one more
// script call per response that says something, none for one that says
// nothing. The script writes it into the key's hash, where every
// worker's next wait sees it:
//
//   - A pause (Retry-After, or a spent quota's reset): no worker's turn
//     comes before it.
//   - A window (remaining units until a reset): units spend from it as
//     they go, so requests in flight count before their responses
//     arrive. Waits past a spent window keep their places in the queue
//     (FIFO): at the reset one probe goes, and the response that tells the
//     next window moves the queue up; without one, a probe a second. A
//     window running low (under a tenth of its size, or 10 units) is
//     spread: its units go evenly until the reset.
//   - A bare refusal (429 or 503 that says nothing of when): the fleet's
//     pace is cut to 0.7 of the configured rate (of the pace in force,
//     for a cut that follows another; never below a quarter of the
//     rate), and regrows to the rate in steps over 2 s; queued turns
//     get the time back as it regrows. A lone refusal first shifts the
//     schedule by two intervals; a second within 10 s cuts. Refusals of
//     requests sent before the last cut are ignored. The cut is a fraction
//     of the configured rate, never of a rate read from state that Redis
//     could lose.
//   - A hidden budget (a server that refuses with Retry-After alone, below
//     the configured limit: a limit told too high, or a budget other
//     clients spend too): the script counts the fleet's units between
//     refusals, and two cycles that agree make a window of the units the
//     budget took per the time it took them back, which every worker's
//     waits spend, then a probe at its end whose acceptance starts the
//     next (the engine's rules, rule for rule). A wait's reply on such a
//     key carries the window's reset, and the response to a unit sent
//     past it costs one more script call, to start the next window:
//     about one a window, none on a key that was never refused.
//
// A server's declared pace (Feedback.Declared) is not adopted: a fleet
// shares its configured limits, and a declared one applies only where
// none is configured. The window and the cut pace the fleet below them.
//
// # Guarantees
//
//   - One round trip per wait, fewer for a hot key (see Leased turns): a
//     Lua script (EVALSHA, reloaded after NOSCRIPT) gives the wait its
//     ticket using Redis's TIME and returns a relative wait. Workers'
//     clocks are never consulted, so clock skew between them does not
//     matter. Callers are served in the order they reach Redis. The
//     script runs the operations of throttle's engine (internal/schedule)
//     rule for rule, its constants prepended from the engine's table; a
//     differential suite drives both with the same operations and
//     compares their states and replies, and the same property suite
//     drives both.
//   - A turn past ctx's deadline is refused by the script itself, at once,
//     and nothing is kept; a wait cancelled during its sleep gives its
//     units back, and the tickets behind it move up.
//   - A key's Pause writes "nothing before now+d" where every process's
//     next wait sees it, and the waits already sleeping in every process
//     learn it (see Pauses below); a cut, a window, a settle and a refund
//     reach them the same way.
//   - One Redis hash per key, expiring once its state is that of a new key;
//     the key's text is encoded, so any user key is safe and all of a
//     key's state stays in one Cluster slot.
//   - When Redis cannot answer within [Limiter.Timeout], the [FailMode]
//     decides; a breaker keeps an outage from charging every wait the
//     timeout, and recovery is automatic. A process carries what it knows
//     of a key across an outage both ways: a FailLocal wait takes no turn
//     before the last one Redis gave this process (its last ticket's, as
//     last learned: when Redis moves it earlier, the wait goes earlier)
//     nor inside a pause it knows, and a state Redis lost (a restart,
//     FLUSHALL, a failover, an eviction) takes on each process's last
//     turn and pause at its next wait.
//
// # Pauses and other moves of the queue
//
// A pause (Pause, or Observe with a Retry-After) stops the whole fleet,
// including turns handed out before it: "one worker gets 429 with
// Retry-After: 2; no worker sends for 2 s". The script that moves queued
// turns (a pause, a cut, a window, a refund) PUBLISHes "id key" on the
// Limiter's channel, Prefix + "pause." + base64url(name); in Cluster a
// PUBLISH reaches every node. Each process with waits sleeping on that
// key asks the script for their turns again, in one call for all of them
// (waits that come to need an answer while it is in flight are asked in
// the next), so every turn follows from the moved state. A refund (a
// cancelled wait, leased turns given back) moves only the turns behind
// the refunded ticket, earlier: its message says which ticket ("id:qi:e"
// for "id"), the waits ahead of it ask nothing, and a refund of the
// queue's last ticket, which moves no turn, is not published.
//
// The subscription costs no command per wait: each process subscribes
// (one connection, one goroutine per Limiter) with its first sleeping
// wait and keeps the subscription a second after the last (or until
// [Limiter.Close]); a busy Limiter stays subscribed. Pub/sub delivers only to
// subscribers that are up: a wait that could have missed a message (the
// subscription was not up when it reserved, went down since, or a message
// came before the wait listened) asks for its turn once more before
// going. So does every sleeping first attempt, reservation or not, as its
// turn comes: a retry or a wait of a higher class that another process
// queued ahead of it within a push's latency of its turn took that turn,
// and the push saying so may come after it; nothing passes a retry, whose
// wait goes at its turn as told. If Redis is down, waits keep the turns
// they have. On a Ring, a
// channel lives on one shard: only moves of keys on that shard are pushed.
//
// # Leased turns
//
// One call per wait is the ceiling of a hot key. A process whose waits
// on a key overlap leases turns instead: one script call (op lease) takes k tickets of one unit,
// as k waits in a row would take them, so every rule applies to them
// unchanged (never over, the key's FIFO queue, exact refunds, pauses,
// windows, cuts), and the process hands them to its waits in order; each
// sleeps to its turn as any wait does.
//
//   - Which waits: of one unit, first attempts (Wait(ctx), WaitN(ctx, 1);
//     a Transport's requests), of a Limiter without further limits.
//     Retries, larger costs, reservations and tries call as before. A wait that finds no other wait of its key in progress in
//     the process, none overlapping lately (100 ms) and no leased turn
//     calls op wait as before: a process whose waits come one at a time
//     makes one call per wait that goes at once, two for one that sleeps.
//     A leased turn goes as told, without an ask: a wait passing it
//     within a push's latency may go beside it (MaxLease).
//   - How many: k is the waits queued in the process plus, when at least 8
//     came within the last 100 ms, those expected within 50 ms at that
//     rate, at most [Limiter.MaxLease] (256; 1 turns leases off). The script
//     keeps an expected wait's ticket only if its turn comes no earlier
//     than that wait is expected, less 10 ms: the remaining quota (the
//     queue, a pause) sizes the lease. While a window or a cut is in
//     force, only the waits queued are leased for (a window's units at
//     its reset would come before waits asleep until then are back). The next lease is made
//     ahead, in a goroutine of its own that ends with the call, when the
//     held tickets would last less than four times the recent leases' time (at
//     least 0.5 ms) at the waits' pace (over 10 ms, when faster than the
//     100 ms rate), and no more than the tickets of 5 ms at that rate.
//   - Deadlines: a wait takes the next leased ticket only if its turn is
//     within ctx's deadline; otherwise it fails at once with a
//     [*throttle.DeadlineError] and the ticket stays for the next wait.
//   - Moves: a push (a pause, a cut, a refund) makes the process ask the
//     held tickets' turns again, in one call, before it hands one out; a
//     wait sleeping on one is a sleeping wait.
//   - What comes back: the tickets held, when no wait of the key is in
//     progress for 100 ms (a timer), when the last one ends by its
//     context, and at Close; a ticket unused 30 ms after its turn is
//     handed out no more (sending later would bunch the units) and goes
//     back in the key's next lease call, before its tickets are taken.
//     The script makes a hole of a turn not yet due (the cancel op's rule:
//     exact) and settles a spent one (its units went at its turn) to no
//     cost, the settle rule's give-back (the bucket's units back, to its
//     burst and no further), while nothing is queued and no pause holds,
//     so that no turn moves; otherwise the spent turn stays spent. If the
//     process dies, its tickets go at their turns. FailMode and store errors apply to the
//     waits queued for a lease as to waits; a lease whose reply comes late
//     is given back as a late wait's ticket is.
//
// The bound. On Redis's clock nothing changes: every turn is the
// schedule's, at most burst + rate·t in any t, a spent turn given back
// counted as a settled cost is (at its turn, then given back). A leased
// turn is used at most 30 ms after it came, so the requests sent in any
// t are at most burst + rate·(t + 30 ms) (beside the wake-up delay of any
// wait). The fleet admits less than the schedule by the spent turns that
// could not be given back (turns were queued, or a pause held): at most
// MaxLease per process each time its waits stop taking them (its demand
// drops, or a pause held them all), none while it keeps its pace.
// Across processes a wait may go before one of another process that
// reached Redis earlier, by at most the turns leased ahead (MaxLease, and
// 50 ms of demand).
//
// # Redis keys
//
// A key's state lives at Prefix + "{" + base64url(name) + "." +
// base64url(key) + "}" (Prefix defaults to "throttle:"), a hash whose
// fields schedule.lua describes: the core (the state's id, the bucket,
// the two queues' counters, units in flight and per second, packed
// doubles, then the configuration that wrote it) and, while any is in
// force, the window, the cut, the further limits and the queues' holes
// in one MessagePack field. A key's in-flight cap ([Limiter].InFlight) lives beside it, at
// the same name with the suffixes ":lease", ":queue", ":queued",
// ":released" and ":cap" after the closing brace (the same hash tag, so
// the same Cluster slot): the leases and the acquisitions waiting, as
// sorted sets, and the cap in force (inflight.lua describes them). They
// expire twice LeaseTTL after the last call.
//
// A key's state in another form (one a version before 0.1.0 wrote) is no
// state this version reads: the key starts anew, a full bucket at the
// configured pace, as after an eviction.
//
// # Redis as operators run it
//
// Versions: Redis 5.0 or later, or Valkey. The script reads TIME and then
// writes, which needs effects replication (the default since Redis 5.0;
// the script does not call redis.replicate_commands); it uses EVALSHA
// (EVAL after NOSCRIPT), struct and cmsgpack, HSET with several fields (4.0),
// PEXPIRE and PUBLISH, and replies in RESP2 types only (no
// redis.setresp). The tests run Redis 7.0 and Valkey 8.0 (TestServers);
// Redis 5 and 6 are not packaged for the Debian release the tests run on.
//
// Eviction: a state Redis evicts comes back as a full bucket, a burst
// more for the fleet each time. Keep a Limiter's state on a Redis with
// maxmemory-policy noeviction; allkeys-* evicts any key, and volatile-*
// evicts these too, since they have a TTL. [Limiter.Check] asks the server
// (where CONFIG is readable) and returns an error matching [ErrEvictable].
//
// Timeouts: [Limiter.Timeout] holds whatever the client's options, also
// for go-redis's default ContextTimeoutEnabled false, with which the
// client ignores a context's deadline while it reads: a *redis.Client
// then calls through its WithTimeout copy (read timeout = Timeout), inline;
// a Cluster or Ring client runs each call in a goroutine of its own, and a
// call Redis answers late is finished in the background and a ticket it
// took given back (see [Limiter]). Errors and events carry the real cause
// of a failure (a refused connection, a READONLY replica), reachable with
// errors.Is and errors.As; the first calls of an outage may report only
// that Redis did not answer in time, until the client gives up on them.
//
// Events: [Limiter].OnEvent is told of store errors, the breaker opening
// and closing, waits answered by the FailMode (rate-limited), a
// configuration another process wrote followed, acquisitions that
// blocked on the in-flight cap, and settles' charges clamped.
//
// Sentinel: a failover client ([redis.NewFailoverClient]) follows a
// failover by itself; waits meanwhile go to the FailMode for as long as
// the master does not answer. Redis replicates asynchronously, so a
// promoted replica may hold a state a little older than the last turns
// the old master gave: up to a burst (plus the tickets then sleeping)
// more in the second of the failover.
package distributed
