// Package throttle is the client side of rate limits: it makes a program
// that calls someone else's API stop collecting 429s.
//
// Requests wait for their turn in a token bucket instead of being refused;
// every response's rate-limit headers are read, and what they say paces the
// next requests; 429s and transient failures are retried with jittered
// exponential backoff.
//
// # Wrapping an http.Client
//
// Most programs need one line:
//
//	client := &http.Client{Transport: &throttle.Transport{
//		Waiter: &throttle.Limiter{Limit: 10, Burst: 10}, // per host
//	}}
//
// [Transport] waits for quota per key (the host by default), pauses a key
// whose quota the server says is spent, spreads a server's window that runs
// low, adopts a server's declared limit where none is configured, slows down
// on bare 429s, and retries. The zero Transport works: no pacing of its own,
// only what servers say.
//
// # Queue workers
//
// A worker that spends a quota per job, HTTP or not, waits on the [Limiter]
// itself:
//
//	err := lim.For(tenant).WaitN(ctx, cost)
//
// # The Waiter seam
//
// [Waiter] is what Transport and workers wait on: WaitN(ctx, n), the method
// of x/time/rate's Limiter, so a plain *rate.Limiter fits. [KeyedWaiter]
// keeps a quota per key, [Pauser] can be told "nothing before d from now",
// and [Adapter] takes all a response said ([Feedback]). The in-process
// [Limiter] and the Redis-shared waiter of package
// github.com/throttle-go/throttle/distributed implement all four. Every
// wait is a reservation (no polling; callers served in arrival order), is
// deadline-aware ([ErrWouldExceedDeadline], reserving nothing), and gives
// its units back when its context ends.
//
// Besides the blocking wait, a key's waiter of either implements [Trier]
// (TryN: spend now or not at all, never blocking), [Reserver] (ReserveN:
// a turn as a [Reservation], to wait for or cancel), [Inspector]
// (State: a read-only view of the key, [State]) and [Settler] (Settle: a
// wait's cost amended after the fact, an LLM call's tokens from its
// usage; through a Transport, [Transport].Settle and [SettleResponse]);
// [Limiter.SetRate] changes a key's rate while the program runs.
//
// # In flight
//
// A key may also cap the units it holds at once ([Limiter].InFlight,
// the distributed Quota's InFlight), as an API that allows 100
// concurrent requests states it. [Acquirer] (AcquireN) takes units under
// the cap, first come first served, and returns their release;
// [Transport] holds each attempt's units from before its wait for quota
// until its response body is closed or read to the end, a transport
// error, or its context's end. The cap is its own state, beside the
// schedule: a wait takes its slot, then its turn, or nothing.
//
// # The schedule
//
// A key's waits are tickets in a queue (retries, through [RetryWaiter],
// ahead of first attempts). A ticket's turn is never stored: it follows
// from the key's state whenever it is asked for — a token bucket of the
// units gone, a hold (pauses), the server's window, a declared pace and an
// adaptive cut — so a pause, a cut that regrows, or a refund moves every
// queued turn at once, and nothing has to be patched afterwards. The
// model, its constants and its invariants are stated once, in
// schedule.go; the distributed package's Redis script follows it rule for
// rule, takes its constants from [ScheduleConstants], and one property
// suite (internal/schedtest) checks both: never more than the bucket
// allows in any interval, nothing inside a pause, FIFO, exact refunds, no
// wedge once the server stops rejecting, and bounded memory.
//
// # Reading headers
//
// The Transport reads every response with package [ratelimit], which turns
// a response's headers, in every dialect in use, into a [ratelimit.Reading]:
// Retry-After, the IETF RateLimit and RateLimit-Policy fields of every
// draft generation, X-RateLimit-* and the vendors' own (GitHub, OpenAI,
// Anthropic, Discord, Azure, Shopify, …). Absolute times are measured
// against the response's own Date, so a client whose clock is off computes
// the same waits. A [RetryPolicy]'s Classify hook sees the reading in
// [Outcome].Reading; a [Waiter] that adapts gets it as [Feedback].
//
// # Errors
//
// Errors are sentinels wrapped with context: [ErrWouldExceedDeadline] (also
// [context.DeadlineExceeded]; type [DeadlineError]), [ErrCostExceedsBurst],
// [ErrInvalidLimit], and for settling a response [ErrSettled] and
// [ErrNoSettler]. HTTP statuses are never errors: a final 429 is a
// response.
package throttle
