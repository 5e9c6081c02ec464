// Package throttle is the client side of rate limits: it makes a program
// that calls someone else's API stop collecting 429s.
//
// Requests wait for their turn instead of being refused; every response's
// rate-limit headers are read, and what they say paces the next requests;
// 429s and transient failures are retried with jittered exponential
// backoff.
//
// # Wrapping an http.Client
//
// Most programs need one line:
//
//	client := &http.Client{Transport: &throttle.Transport{
//		Waiter: &throttle.Limiter{Limits: []throttle.Limit{{Rate: 10, Burst: 10}}}, // per host
//	}}
//
// The zero Transport works too: no pacing of its own, only what servers
// say.
//
// # One quota per key
//
// A [Limiter] keeps a [Quota] per key (a host, an API key, a tenant);
// For(key) returns it, with every operation on it: Wait, Try, Reserve,
// Settle, Acquire (in flight), Pause, Observe (a response), State. The
// distributed package's Limiter is the same contract kept in Redis for a
// fleet: a program moves from one process to many by changing its
// constructor. A plain *rate.Limiter still fits a Transport as a
// [Waiter].
//
// A queue worker waits before each job that spends the quota:
//
//	err := lim.For(tenant).Wait(ctx)
//
// # Who decides what
//
// A key's state decides every turn; the rules that change it live in one
// engine (internal/schedule), which the Limiter runs in memory and the
// distributed package runs in Redis, proven equal op by op. Around it:
//
//   - per key, fleet-wide for a distributed Limiter: turns, pauses, a
//     server's window, the slow-down after bare refusals (a cut that
//     regrows, a trim), a hidden budget learned from refusals, settled
//     costs, further limits;
//   - per key, in one process (a Limiter's keys only): a declared pace a
//     server states (the key follows it where none is configured), the
//     cap by what a server's bucket holds, and the strict-server rules
//     (internal/strict: the anchor of a key one unit deep, the burst's
//     spread, timing refusals, wake-up lateness);
//   - per Transport, in one process: what one response means (package
//     [ratelimit] reads the headers; the Transport's feedback picks the
//     policy that binds), and what its keys' responses taught it beyond
//     one response (internal/learn: a window's length from its resets, a
//     request's cost in other units, a reset instant's earliest bound),
//     the retry decision and its backoff.
//
// # Reading headers
//
// The Transport reads every response with package [ratelimit], which
// turns a response's headers, in every dialect in use, into a
// [ratelimit.Reading]: Retry-After, the IETF RateLimit and
// RateLimit-Policy fields of every draft generation, X-RateLimit-* and
// the vendors' own. Absolute times are measured against the response's
// own Date, so a client whose clock is off computes the same waits.
//
// # Errors
//
// Errors are sentinels wrapped with context: [ErrWouldExceedDeadline]
// (also [context.DeadlineExceeded]; type [DeadlineError]),
// [ErrCostExceedsBurst], [ErrInvalidLimit], and for settling a response
// [ErrSettled] and [ErrNoSettler]. HTTP statuses are never errors: a
// final 429 is a response.
package throttle
