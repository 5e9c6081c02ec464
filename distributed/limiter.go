package distributed

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttle-go/throttle"
)

// DefaultTimeout bounds each Redis call when [Limiter.Timeout] is zero.
const DefaultTimeout = 50 * time.Millisecond

// Limiter keeps a quota per key in Redis, shared by every process that
// uses the same name on the same Redis: a fleet's one API key, a quota
// that queue workers in several processes spend. It is the fleet's
// [throttle.Limiter]: the same limits, the same [throttle.Quota] per key,
// so a program moves from one process to a fleet by changing its
// constructor:
//
//	lim := &throttle.Limiter{Limits: limits}     // one process
//	lim := distributed.New(client, "api", limits...) // a fleet
//	err := lim.For("api.github.com").Wait(ctx)
//
// Most callers use it through [throttle.Transport], or call Wait on
// For(key) before each job that spends the quota: what any process's
// responses say (pauses, windows, bare refusals) paces every process
// (see "Fleet-wide pacing" in the package doc).
//
// # How a wait works
//
// A wait is one Redis round trip (or a share of one: see "Leased turns"
// in the package doc): a Lua script (schedule.lua, the engine's rules
// rule for rule) reads Redis's clock, gives the wait a ticket in the
// key's queue, and returns how long until its turn; the caller then
// sleeps without talking to Redis again. Turns are given in the order
// calls reach Redis (a retry's cost, [throttle.Cost].Retry, ahead of
// first attempts). A turn past ctx's deadline is refused inside the same
// script, before anything is kept. A turn is not stored: it follows from
// the key's state, so a pause, a cut or a refund moves every queued turn
// at once; the script that moves them publishes it, and every process
// with waits sleeping there asks again (one more call for all of them,
// only then). If ctx ends during the sleep, a second call gives the
// units back: the tickets behind move up. State is one Redis hash per
// key that expires once it is that of a new key again, so idle keys cost
// nothing.
//
// # When Redis is away
//
// Each call is bounded by Timeout, and after three consecutive failures a
// breaker sends waits straight to the FailMode, letting one probe through
// every 250ms; the first probe that succeeds ends the outage. The breaker
// belongs to the Limiter: on a Cluster with one master down, every key of
// the Limiter fails over, not only those in the lost slots.
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
// limit. Either way the errors and events that follow a failure carry its
// real cause (a refused connection, not "context deadline exceeded"),
// learned from the late call or from one PING in the background. Timeout
// covers connecting too: long-running workers connect at start (a PING
// per expected concurrent caller) or raise Timeout.
//
// # Zero value and concurrency
//
// A Limiter must be made by [New]; the exported fields may be set after
// New and before first use, and must not change afterwards. Its methods
// and the quotas For returns are safe for concurrent use. It needs no
// Close: while any of its waits in this process sleeps 10ms or more, one
// goroutine (and one Redis connection) holds a subscription to the
// Limiter's channel; the last such wait to end stops it and waits for
// it, so no goroutine outlives the waits; an in-flight acquisition (see
// InFlight) listens through it too. While it holds in-flight leases, one
// goroutine renews them; the last release stops it. Leased turns (see
// the package doc) add a timer per key that gives unused turns back
// 100ms after the key's last wait, and a goroutine per lease call that
// ends with the call.
type Limiter struct {
	// FailMode says what a wait does when Redis cannot answer. The zero
	// value is FailLocal.
	FailMode FailMode

	// Workers is the number of processes expected to share the Limiter;
	// a FailLocal wait paces this process at each limit's share (its
	// rate, or its count, divided by Workers) while Redis is away. Zero
	// (or less) means 1: the whole of each limit for each process.
	Workers int

	// Timeout bounds each Redis call. Zero means DefaultTimeout (50ms).
	Timeout time.Duration

	// Version orders configurations of the Limiter: a key's state in
	// Redis keeps the limits (and Version) of the process that wrote it,
	// and a process with other limits is refused with an error matching
	// [ErrConfigMismatch] (a [*ConfigError] for the first limit) rather
	// than mixing two paces in one bucket, unless its Version is higher:
	// it then replaces the configuration (the key keeps its state, at the
	// new limits), and processes with a lower Version follow it, each
	// reporting it once as a [throttle.EventConfig]. To change a running
	// fleet's limits, deploy the new limits with a higher Version. Zero
	// is the first version; one below 0 or above 2^53 is invalid: every
	// operation fails with an error matching [throttle.ErrInvalidLimit]
	// before any call, as for an invalid limit. A key's configuration is
	// forgotten with its state (when the key is idle).
	Version int

	// MaxQueued bounds the units each key's waits may hold queued across
	// the fleet (the key's queue in Redis, which every process's waits
	// join), as [throttle.Limiter].MaxQueued does in one process: a wait
	// (or reservation) that would queue and take the units queued past it
	// fails at once with an error matching [throttle.ErrQueueFull],
	// spends nothing, and is reported as an [throttle.EventQueueFull] to
	// OnEvent and the call's context ([throttle.WithEvents]). Every
	// process sharing the Limiter should use the same. A Limiter with a
	// bound leases no turns (see MaxLease): each wait's ticket is in the
	// queue the bound counts. Under FailLocal a process bounds its own
	// queue at its share, MaxQueued/Workers rounded up. Zero means no
	// bound; negative is taken as zero.
	MaxQueued int

	// MaxLease is the most turns of a key one Redis call leases for this
	// process's waits of one unit, and so the most a process holds unused
	// (see "Leased turns" in the package doc). Zero means 256; 1 means no
	// leases: one call per wait; so does a MaxQueued. A leased turn goes
	// without asking Redis again: a retry or a wait of a higher class
	// ([throttle.WithPriority]) that another process queues within a
	// push's latency (about a round trip) of it may go beside it, a unit
	// over the limit. A fleet whose processes use priority classes, or
	// whose retries must never meet a leased turn, sets 1; a Limiter
	// leases no more turns once one of its own waits was of a class but
	// the default's.
	MaxLease int

	// Prefix starts every Redis key of this Limiter. Empty means
	// "throttle:". Limiters with different prefixes never share state.
	Prefix string

	// InFlight caps the units each key may hold at once across every
	// process sharing the Limiter, through [throttle.Quota].Acquire: e.g.
	// 100 for GitHub's concurrent requests. Zero means no cap. Every
	// process sharing the Limiter must set the same cap: one with another
	// is refused with an error matching [ErrConfigMismatch], unless its
	// Version is higher (it then replaces the cap, and those with a lower
	// Version follow it), as for the limits.
	//
	// Units held are leases in Redis, in the key's Cluster slot, that
	// expire LeaseTTL after they were taken or last renewed. The process
	// that holds them renews them every LeaseTTL/3 (one goroutine per
	// Limiter while it holds leases, one script call per key and period),
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
	// script call and pushes the grant on the Limiter's channel to that
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
	// process sharing the Limiter should use the same.
	LeaseTTL time.Duration

	// OnEvent, if not nil, is told of the decisions the Limiter takes on
	// its own: a failed store call (EventStoreError, Err the real cause),
	// the breaker opening (EventBreakerOpen, Delay the time between
	// probes) and closing (EventBreakerClose), waits answered by the
	// FailMode (EventFallback, Reason says which mode answered and how;
	// the first of an outage at once, then at most one a second,
	// counting the waits answered so meanwhile), a configuration another
	// process wrote followed (EventConfig), an acquisition that blocked
	// 1ms or more on the in-flight cap (EventInFlight), and a settle's
	// charge clamped (EventClamp), a wait refused by MaxQueued
	// (EventQueueFull). A store error is reported per failed
	// call, not per wait: while the breaker is open, only its probes
	// reach the store. EventInFlight, EventClamp and EventQueueFull also
	// go to the
	// function of the call's context ([throttle.WithEvents]: a
	// Transport's OnEvent), as a [throttle.Limiter] tells them. OnEvent
	// is called synchronously, possibly from several goroutines at once;
	// it must not block.
	OnEvent func(throttle.Event)

	client redis.UniversalClient
	name   string
	limits []throttle.Limit // as given to New

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
	localX      localLimits // FailLocal's, for a Limiter with further limits
	memo        memos       // what this process knows of each key, across outages
	pushes      pushes      // moves of queued turns, pushed to sleeping waits
	slots       slotLeases  // in-flight leases held, and their renewer
	leases      leases      // leased turns not yet taken, by key
	classes     atomic.Bool // a wait of a class but the default's was made: no more leases

	localCapOnce sync.Once
	localCap     *throttle.Limiter // FailLocal's in-flight cap

	once sync.Once // computes def
	def  *keyWaiter

	waitersOnce sync.Once // computes seed and channel
	seed        maphash.Seed
	channel     string                              // pushChannel(Prefix, name)
	waiters     [forCache]atomic.Pointer[keyWaiter] // the waiters For made last, by their key's hash

	xOnce sync.Once // computes x
	x     *xconf    // the further limits as the script takes them; nil if none

	conf atomic.Pointer[qconf] // the configuration in force: see config
}

// Close ends this process's subscription to the Limiter's pushed moves
// now rather than a second after the last sleeping wait (see "Pauses" in
// the package doc), stops renewing the in-flight leases still held (they
// expire within LeaseTTL unless released; a release after Close still
// works), and waits for the refunds of cancelled waits, the releases of
// leases, and the store calls still in flight (a call a wait stopped
// waiting for is left up to 2s to finish, so that a ticket it took is
// given back). A Limiter needs no Close: it is for programs and tests
// that check no goroutine is left. Waits after Close still work; their
// subscription ends with the last of them.
//
// Close also gives back the turns this process leased and did not use
// (see "Leased turns" in the package doc); waits after Close call
// without leases.
func (q *Limiter) Close() error {
	q.leases.close()
	q.pushes.close()
	q.slots.close()
	q.refunds.Wait()
	return nil
}

// New returns a Limiter named name, kept in the Redis that client
// reaches (any [redis.UniversalClient]: a single node, Cluster,
// Sentinel, Ring), with limits as every key's: the limits of a
// [throttle.Limiter], with its rules (a token bucket, a window of any
// [throttle.WindowKind], in the unit waits count or in units of their
// own; none: no limit, pauses and what servers say still apply).
// Processes that use the same name (and Prefix) share its keys, and must
// use the same limits: a process with others is refused with an error
// matching [ErrConfigMismatch] (see [Limiter.Version] to change a
// running fleet's limits).
//
// An invalid limit is not refused here: every operation fails with an
// error matching [throttle.ErrInvalidLimit]. New panics if client is nil.
func New(client redis.UniversalClient, name string, limits ...throttle.Limit) *Limiter {
	if client == nil {
		panic("throttle/distributed: New with a nil redis client")
	}
	return &Limiter{client: client, name: name, limits: limits}
}

// WaitN waits for n units of the Limiter's own quota (the key ""), so
// that a Limiter is a [throttle.Waiter] as a *rate.Limiter is.
func (q *Limiter) WaitN(ctx context.Context, n int) error {
	return q.defaultWaiter().WaitN(ctx, n)
}

// For returns key's quota: see [throttle.Quota], whose guarantees it
// keeps for every process sharing the Limiter. The key "" is the
// Limiter's own quota, WaitN's. Any string is a safe key (see "Redis
// keys" in the package doc): it cannot reach another key's state. For
// makes no call and allocates only for a key not among the last it made.
func (q *Limiter) For(key string) throttle.Quota { return q.key(key) }

// key returns key's quota. A key's waiter is read-only once made: the
// last ones made are kept (forCache), so that a Transport's For at every
// request allocates nothing for the keys in use.
func (q *Limiter) key(key string) *keyWaiter {
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
func (q *Limiter) waiterSeed() maphash.Seed {
	q.waitersOnce.Do(func() {
		q.seed = maphash.MakeSeed()
		q.channel = pushChannel(q.Prefix, q.name)
	})
	return q.seed
}

func (q *Limiter) defaultWaiter() *keyWaiter {
	q.once.Do(func() { q.def = q.key("") })
	return q.def
}

func (q *Limiter) clock() time.Time {
	if q.now != nil {
		return q.now()
	}
	return time.Now()
}

func (q *Limiter) timeout() time.Duration {
	if q.Timeout > 0 {
		return q.Timeout
	}
	return DefaultTimeout
}

var (
	_ throttle.Quotas = (*Limiter)(nil)
	_ throttle.Quota  = (*keyWaiter)(nil)
)
