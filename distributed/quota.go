package distributed

import (
	"context"
	_ "embed"
	"fmt"
	"hash/maphash"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/internal/schedule"
	"golang.org/x/time/rate"
)

// DefaultTimeout bounds each Redis call when [Quota.Timeout] is zero.
const DefaultTimeout = 50 * time.Millisecond

// The schedule script's source: schedule.lua and its parts, joined in
// this order into one chunk (the parts are files for their size, one idea
// each; they share the chunk's locals, so the order is the script's).
var scheduleSrc = strings.Join([]string{
	scheduleMain, scheduleState, scheduleLimits, scheduleBudget, scheduleTurns, scheduleAdvance, scheduleOps,
}, "\n")

var (
	//go:embed schedule.lua
	scheduleMain string
	//go:embed schedule_state.lua
	scheduleState string
	//go:embed schedule_limits.lua
	scheduleLimits string
	//go:embed schedule_budget.lua
	scheduleBudget string
	//go:embed schedule_turns.lua
	scheduleTurns string
	//go:embed schedule_advance.lua
	scheduleAdvance string
	//go:embed schedule_ops.lua
	scheduleOps string
)

// scheduleScript is the key's schedule in Lua: throttle's schedule.go rule
// for rule, with its constants prepended from schedule.Constants,
// so that each exists once. Scripts are immutable values (source and
// SHA1): sharing one is safe. Run sends EVALSHA and, on NOSCRIPT (a new
// server, a failover, SCRIPT FLUSH), EVAL once, which loads it again.
var scheduleScript = redis.NewScript(luaConstants() + scheduleSrc)

// luaConstants returns the schedule's constants as Lua locals, sorted so
// that the script's SHA1 is stable.
func luaConstants() string {
	c := schedule.Constants()
	names := make([]string, 0, len(c))
	for k := range c {
		names = append(names, k)
	}
	slices.Sort(names)
	var b strings.Builder
	b.WriteString("-- constants from schedule.Constants\n")
	for _, k := range names {
		fmt.Fprintf(&b, "local %s = %s\n", k, strconv.FormatFloat(c[k], 'g', -1, 64))
	}
	return b.String()
}

// Quota is a token bucket kept in Redis and shared by every process that
// uses the same name on the same Redis: a fleet's one API key, a quota that
// queue workers in several processes spend. It refills at a rate of limit
// units per second up to burst units.
//
// Most callers use WaitN, or For(key).WaitN to keep a separate bucket (with
// the same limit and burst) per key: a host, an API key, a tenant. A Quota
// implements [throttle.Waiter] and [throttle.KeyedWaiter], and it and the
// waiters For returns implement [throttle.Adapter] and [throttle.Pauser],
// so [throttle.Transport] and workers use it as they would the in-process
// limiter; what any worker's responses say (pauses, windows, bare
// rejections) paces every worker (see "Fleet-wide pacing" in the package
// doc).
//
// # How a wait works
//
// A wait is one Redis round trip (or a share of one: see "Leased turns"
// in the package doc): a Lua script (schedule.lua, throttle's
// schedule model rule for rule) reads Redis's clock, gives the wait a
// ticket in the key's queue, and returns how long until its turn; the
// caller then sleeps without talking to Redis again. Turns are given in
// the order calls reach Redis (retries, through WaitRetryN, ahead of first
// attempts). A turn past ctx's deadline is refused inside the same script,
// before anything is kept. A turn is not stored: it follows from the key's
// state, so a pause, a cut or a refund moves every queued turn at once;
// the script that moves them publishes it, and every process with waits
// sleeping there asks again (one more call for all of them, only then). If ctx ends during
// the sleep, a second call gives the units back: the tickets behind move
// up. State is one Redis hash per key that expires once it is that of a
// new key again, so idle keys cost nothing.
//
// # When Redis is away
//
// Each call is bounded by Timeout, and after three consecutive failures a
// breaker sends waits straight to the FailMode, letting one probe through
// every 250ms; the first probe that succeeds ends the outage. The breaker
// belongs to the Quota: on a Cluster with one master down, every key of
// the Quota fails over, not only those in the lost slots.
//
// Timeout bounds every call whatever the client's options. A go-redis
// client ignores context deadlines while it reads a reply unless
// [redis.Options].ContextTimeoutEnabled is set; a *redis.Client without
// it calls through its WithTimeout copy (the same pool and hooks, a read
// timeout of Timeout), inline like a client with it. A Cluster or Ring
// client without it runs each call in a goroutine of its own: the wait
// stops waiting at Timeout, and the call finishes in the background (up
// to 3s), so that its outcome is still learned: a ticket a late call took
// is given back. An inline call cut at Timeout drops its reply, so a
// ticket that call took stays spent, erring on the side of the API's
// limit. Either way the
// errors and events that follow a failure carry its real cause (a
// refused connection, not "context deadline exceeded"), learned from the
// late call or from one PING in the background. It covers connecting
// too: a cold client on a busy
// machine can need more than 50ms for its first calls, so long-running
// workers connect at start (a PING per expected concurrent caller) or
// raise Timeout.
//
// # Zero value and concurrency
//
// A Quota must be made by [New]; the exported fields may be set after New
// and before first use, and must not change afterwards. Its methods are
// safe for concurrent use. It needs no Close: while any of its waits in
// this process sleeps 10ms or more, one goroutine (and one Redis
// connection) holds a subscription to the quota's pause channel; the last
// such wait to end stops it and waits for it, so no goroutine outlives
// the waits; an in-flight acquisition (see InFlight) listens through it
// too. While it holds in-flight leases, one goroutine renews them; the
// last release stops it. Leased turns (see the package doc) add a timer
// per key that gives unused turns back 100ms after the key's last wait,
// and a goroutine per lease call that ends with the call.
type Quota struct {
	// FailMode says what a wait does when Redis cannot answer. The zero
	// value is FailLocal.
	FailMode FailMode

	// Workers is the number of processes expected to share the quota; a
	// FailLocal wait paces this process at limit/Workers while Redis is
	// away. Zero (or less) means 1: the whole rate for each process.
	Workers int

	// Timeout bounds each Redis call. Zero means DefaultTimeout (50ms).
	Timeout time.Duration

	// Version orders configurations of the quota: a key's state in Redis
	// keeps the limit and burst (and Version) of the process that wrote
	// it, and a process with another limit or burst is refused with a
	// [*ConfigError] (matching [ErrConfigMismatch]) rather than mixing
	// two paces in one bucket, unless its Version is higher: it then
	// replaces the configuration (the bucket keeps its state, at the new
	// pace), and processes with a lower Version follow it, each reporting
	// it once as a [throttle.EventConfig]. To change a running fleet's
	// limit, deploy the new limit with a higher Version. Zero is the
	// first version; one below 0 or above 2^53 is invalid: waits,
	// tries, settles, pauses and State fail with an error matching
	// [throttle.ErrInvalidLimit] before any call, as for a limit that is
	// not positive. A key's configuration is forgotten with its state
	// (when the key is idle).
	Version int

	// MaxLease is the most turns of a key one Redis call leases for this
	// process's waits of one unit, and so the most a process holds unused
	// (see "Leased turns" in the package doc). Zero means 256; 1 means no
	// leases: one call per wait.
	MaxLease int

	// Prefix starts every Redis key of this quota. Empty means
	// "throttle:". Quotas with different prefixes never share state.
	Prefix string

	// InFlight caps the units each key may hold at once across every
	// process sharing the quota, through [throttle.Acquirer] (AcquireN on
	// For(key)): e.g. 100 for GitHub's concurrent requests. Zero means no
	// cap. Every process sharing the quota must set the same cap: one
	// with another is refused with an error matching [ErrConfigMismatch],
	// unless its Version is higher (it then replaces the cap, and those
	// with a lower Version follow it), as for the limit and burst.
	//
	// Units held are leases in Redis, in the key's Cluster slot, that
	// expire LeaseTTL after they were taken or last renewed. The process
	// that holds them renews them every LeaseTTL/3 (one goroutine per
	// Quota while it holds leases, one script call per key and period),
	// so a long request keeps its units, and a process killed (kill -9),
	// or cut off from Redis, gives its units back within LeaseTTL. A
	// renewal writes again a lease Redis lost (a restart without
	// persistence, a failover, an eviction): between the loss and the
	// renewals (LeaseTTL/3 at most) the units in flight are not counted,
	// and up to twice the cap may be in flight until they end.
	//
	// An acquisition that fits is one script call. One that does not
	// takes its place in a queue in Redis, first come, first served
	// across the fleet, and sleeps: the release (or the call that finds
	// a lease expired) that frees its units grants them in the same
	// script call and pushes the grant on the quota's channel to that
	// acquisition alone, and its process asks once more. An acquisition
	// listens through the subscription sleeping waits use, from before
	// its first call. With the cap full a request costs about four script
	// calls: acquire, the wait for quota, the ask after the push, the
	// release. A waiting acquisition also asks at the earliest lease's
	// expiry, and at LeaseTTL/2 at the latest, which keeps its place
	// alive; one whose process died leaves the queue within LeaseTTL.
	//
	// If Redis cannot answer an acquisition, FailMode decides: FailOpen
	// admits it, FailClosed refuses it with [ErrStoreUnavailable], and
	// FailLocal caps this process at InFlight/Workers (rounded up).
	InFlight int

	// LeaseTTL is how long an in-flight lease lives without renewal:
	// the longest a process killed while holding units keeps them from
	// the fleet, and the longest Redis may be away before a request still
	// in flight loses its lease (its units may then go to another
	// process). Zero means DefaultLeaseTTL (30s); less than 10ms is
	// taken as 10ms. Keep it well above Timeout and the longest stall of
	// a process (a renewal is one script call every LeaseTTL/3). Every
	// process sharing the quota should use the same.
	LeaseTTL time.Duration

	// OnEvent, if not nil, is told of the decisions the Quota takes on
	// its own about the store: a failed call (EventStoreError, Err the
	// real cause), the breaker opening (EventBreakerOpen, Delay the time
	// between probes) and closing (EventBreakerClose), and waits answered
	// by the FailMode (EventFallback, Reason says which mode answered and
	// how; the first of an outage at once, then at most one a second,
	// counting the waits answered so meanwhile). A store error is
	// reported per failed call, not per wait: while the breaker is open,
	// only its probes reach the store. An acquisition that blocked 1ms or
	// more on the in-flight cap is an EventInFlight, told to OnEvent and
	// to the function of the call's context ([throttle.WithEvents]: a
	// Transport's OnEvent), as a Limiter tells it. OnEvent is called
	// synchronously, possibly from several goroutines at once; it must
	// not block.
	OnEvent func(throttle.Event)

	// Limits are further limits of every key, each a token bucket, a
	// window or a sliding log in a unit of its own beside the quota's
	// bucket (see [throttle.UnitLimit]; windows on Redis's clock), spent all or none by WaitCost on For(key)
	// ([throttle.CostWaiter]); a WaitN spends nothing of them but waits
	// its turn. Kept in the key's hash; a key with them takes no leased
	// turns. FailLocal holds each at this process's share while Redis is
	// away (see FailLocal). nil means none.
	Limits []throttle.UnitLimit

	client redis.UniversalClient
	name   string
	limit  rate.Limit
	burst  int

	// now is this process's clock, used only for local bookkeeping (the
	// breaker's probe times and the FailLocal buckets); never sent to
	// Redis and never part of a shared decision. nil means time.Now.
	now func() time.Time

	refunds sync.WaitGroup // store calls and refunds in flight; Close waits for them
	br      breaker
	health  health // the store's last failure, fallbacks reported

	honoursOnce sync.Once      // computes honours
	honours     bool           // the client ends calls at their context's deadline
	inline      redis.Scripter // the client calls run inline through, if honours
	diagnosing  atomic.Bool    // a diagnose PING is in flight
	local       localBuckets
	localX      localLimits // FailLocal's, for a quota with Limits
	memo        memos       // what this process knows of each key, across outages
	pushes      pushes      // moves of queued turns, pushed to sleeping waits
	slots       slotLeases  // in-flight leases held, and their renewer
	leases      leases      // leased turns not yet taken, by key

	localCapOnce sync.Once
	localCap     *throttle.Limiter // FailLocal's in-flight cap

	once sync.Once // computes def
	def  *keyWaiter

	waitersOnce sync.Once // computes seed and channel
	seed        maphash.Seed
	channel     string                              // pushChannel(Prefix, name)
	waiters     [forCache]atomic.Pointer[keyWaiter] // the waiters For made last, by their key's hash

	xOnce sync.Once // computes x
	x     *xconf    // Limits as the script takes them; nil if none

	conf atomic.Pointer[qconf] // the configuration in force: see config
}

// Close ends this process's subscription to the quota's pushed moves now
// rather than a second after the last sleeping wait (see "Pauses" in the
// package doc), stops renewing the in-flight leases still held (they
// expire within LeaseTTL unless released; a release after Close still
// works), and waits for the refunds of cancelled waits, the releases of
// leases, and the store calls still in flight (a call a wait stopped
// waiting for is left up to 2s to finish, so that a ticket it took is
// given back). A Quota needs no Close: it is for programs and tests that
// check no goroutine is left. Waits after Close still work; their
// subscription ends with the last of them.
//
// Close also gives back the turns this process leased and did not use
// (see "Leased turns" in the package doc); waits after Close call
// without leases.
func (q *Quota) Close() error {
	q.leases.close()
	q.pushes.close()
	q.slots.close()
	q.refunds.Wait()
	return nil
}

// New returns a Quota named name, kept in the Redis that client reaches
// (any [redis.UniversalClient]: a single node, Cluster, Sentinel, Ring),
// refilling at limit units per second up to burst units. Processes that
// use the same name (and Prefix) share it, and must use the same limit
// and burst: a process with another one is refused with a [*ConfigError]
// (see [Quota.Version] to change a running fleet's limit). limit may be
// [rate.Inf] (no pacing, pauses still apply).
//
// A limit that is not positive or a burst below 1 is not refused here: each
// wait returns an error matching [throttle.ErrInvalidLimit]. New panics if
// client is nil.
func New(client redis.UniversalClient, name string, limit rate.Limit, burst int) *Quota {
	if client == nil {
		panic("throttle/distributed: New with a nil redis client")
	}
	return &Quota{client: client, name: name, limit: limit, burst: burst}
}

// WaitN blocks until n units of the quota's own bucket (the one For("")
// returns) are available, or ctx ends. See For for the contract.
func (q *Quota) WaitN(ctx context.Context, n int) error {
	return q.defaultWaiter().WaitN(ctx, n)
}

// Pause makes every process sharing the quota's own bucket wait at least d
// from now (Redis's clock) before its next turn. See For.
func (q *Quota) Pause(ctx context.Context, d time.Duration) error {
	return q.defaultWaiter().Pause(ctx, d)
}

// Adapt applies what a server said about the quota's own bucket (the one
// For("") returns) for every process sharing it. See For.
func (q *Quota) Adapt(ctx context.Context, f throttle.Feedback) error {
	return q.defaultWaiter().Adapt(ctx, f)
}

// AdaptReport is Adapt, and reports what it did: see
// [throttle.AdaptReporter].
func (q *Quota) AdaptReport(ctx context.Context, f throttle.Feedback) (throttle.Adapted, error) {
	return q.defaultWaiter().AdaptReport(ctx, f)
}

// For returns the waiter of key's bucket: the same limit and burst as q,
// its own state, shared by every process that uses q's name and the same
// key. Any string is a safe key (see "Redis keys" in the package doc): it
// cannot reach another key's state. For is cheap; the
// result is safe for concurrent use and also implements [throttle.Pauser],
// [throttle.Adapter] and [throttle.AdaptReporter] (the pause the script
// set: a learned budget's refused probe ends it before the Retry-After),
// [throttle.RetryWaiter], [throttle.Trier] (TryN: one
// script call, spends now or nothing), [throttle.Reserver] (ReserveN:
// one script call takes a ticket as a wait does; the Reservation's Delay
// is the turn as learned then, its Wait sleeps and asks again as a wait
// does, its Cancel is one call), [throttle.Inspector] (State: one
// read-only call that writes nothing), [throttle.Settler] (Settle: one
// script call amends a wait's cost for the whole fleet, a debt that every
// process's next waits pay or units back that move every process's
// queued turns earlier) and [throttle.Acquirer] (AcquireN under the key's
// in-flight cap: see InFlight). FailMode decides a try or a reservation
// that Redis cannot answer as it decides a wait; State and Settle then
// fail with [ErrStoreUnavailable].
//
// The result's WaitN(ctx, n) keeps the [throttle.Waiter] contract:
//
//   - n = 0 returns nil at once; n < 0, a limit that is not positive or a
//     burst below 1 fail with [throttle.ErrInvalidLimit], n > burst with
//     [throttle.ErrCostExceedsBurst], before any Redis call.
//   - One script call gives the wait its ticket in the key's queue and
//     returns the wait until its turn (or, for waits of one unit that
//     overlap in the process, a turn this process leased: see "Leased
//     turns" in the package doc). If the turn is past ctx's
//     deadline, WaitN returns a [*throttle.DeadlineError] (matching
//     [throttle.ErrWouldExceedDeadline] and [context.DeadlineExceeded]) at
//     once, and nothing was kept. (If the round trip itself used up the
//     last of the margin, the ticket is given back as below and the same
//     error returned.)
//   - While it sleeps, a move of the key's queue (a pause, a cut, a
//     window, a refund ahead of it) costs its process one more call, for
//     all its waits of the key sleeping then, to learn the new turns (see
//     "Pauses and other moves of the queue" in the package doc); a moved
//     turn past ctx's deadline gives the units back and returns a
//     [*throttle.DeadlineError] at once.
//   - If ctx ends while WaitN sleeps, WaitN returns ctx.Err() at once and a
//     second script call, in the background, gives the n units back: the
//     tickets behind move up,
//     so the units go to the next wait in line, never to two. The refund is
//     best effort: if Redis fails it, the units are lost, which errs on
//     the side of the API's limit. Likewise, if ctx ends (or Timeout
//     passes) while the reserving call itself is in flight: an inline
//     call (see Timeout) is not cut by ctx, WaitN returns when Redis
//     answers (within Timeout) and gives a ticket the call took back; a
//     call in a goroutine of its own (Cluster, Ring) returns at once and
//     is left to finish in the background (up to 3s), and a ticket it
//     took is given back then. A ticket whose turn had already come is
//     spent, and so is one of a call cut at Timeout.
//   - If Redis cannot answer, FailMode decides (see [FailMode]).
//
// WaitRetryN is WaitN with the ticket in the queue of retries, ahead of
// first attempts ([throttle.Transport] uses it for retries).
//
// The result's Pause(ctx, d) writes "nothing before now+d" (Redis's clock)
// into the key's state (d is capped at a week), with a context of its own
// bounded by Timeout, so that the request's context ending a moment later
// does not lose it: every queued turn, in every process, comes no earlier,
// and at the pause's end the queue goes on at the key's pace, at most a
// burst at once. A pause never shortens a longer one. The process
// remembers the pause too (FailLocal honours it, and a state Redis lost
// takes it on). A failed Pause returns an error matching
// [ErrStoreUnavailable], whatever the FailMode.
//
// The result's Adapt(ctx, f) implements [throttle.Adapter] for the whole
// fleet (see "Fleet-wide pacing" in the package doc). A Feedback with no
// pause, no window and no rejection costs nothing (but for the acceptance
// of a unit sent past a learned budget's window's reset: see there);
// otherwise one script call, bounded by Timeout, writes it. f.HasDeclared is ignored: the Quota
// has a configured limit. Adapt never blocks beyond Timeout. If Redis
// cannot answer, the feedback is dropped: Adapt returns nil, except that a
// pause that could not be written returns an error matching
// [ErrStoreUnavailable] (as Pause does, whatever the FailMode), so that
// Transport does not report a pause that did not happen.
func (q *Quota) For(key string) throttle.Waiter {
	// A key's waiter is read-only once made: the last ones made are kept
	// (forCache), so that a Transport's For at every request allocates
	// nothing for the keys in use.
	slot := &q.waiters[maphash.String(q.waiterSeed(), key)%forCache]
	if w := slot.Load(); w != nil && w.key == key {
		return w
	}
	w := newKeyWaiter(q, key)
	slot.Store(w)
	return w
}

// forCache is the number of waiters For keeps: a key's place is its
// hash's, and a key that lands on another's takes it.
const forCache = 64

// waiterSeed returns the seed of For's hashes, and makes the waiters'
// push channel (the same for every key) once.
func (q *Quota) waiterSeed() maphash.Seed {
	q.waitersOnce.Do(func() {
		q.seed = maphash.MakeSeed()
		q.channel = pushChannel(q.Prefix, q.name)
	})
	return q.seed
}

func (q *Quota) defaultWaiter() *keyWaiter {
	q.once.Do(func() { q.def = q.For("").(*keyWaiter) })
	return q.def
}

func (q *Quota) clock() time.Time {
	if q.now != nil {
		return q.now()
	}
	return time.Now()
}

func (q *Quota) timeout() time.Duration {
	if q.Timeout > 0 {
		return q.Timeout
	}
	return DefaultTimeout
}

// check validates the configuration and cost n before any Redis call.
func (q *Quota) check(n int) error {
	c := q.config()
	burst := c.burst
	switch {
	case c.err != nil:
		return c.err
	case n < 0:
		return fmt.Errorf("%w: negative cost %d", throttle.ErrInvalidLimit, n)
	case n > burst:
		return fmt.Errorf("%w: cost %d, burst %d for quota %q", throttle.ErrCostExceedsBurst, n, burst, q.name)
	}
	return nil
}
