// Package throttletest provides real rate-limited HTTP servers for tests:
// handlers that enforce a limit exactly the way servers in the wild do,
// send the headers those servers send, and count what they saw. Point a
// client at one (through [httptest.NewServer], or in-process through
// [Direct]) and check that it stays within the limit, uses the capacity it
// was given, and draws few refusals.
//
//	srv := throttletest.NewSlidingWindow(50, time.Second) // httprate-style, 50 a second
//	ts := httptest.NewServer(srv)
//	defer ts.Close()
//	// ... run the client under test against ts.URL ...
//	st := srv.Stats()                   // arrivals, admitted, rejected
//	most, _ := srv.MaxIn(time.Second)   // the most admitted in any second
//
// # Servers
//
//   - [TokenBucket]: rate and burst, as API gateways enforce them; a bare
//     429, or one with Retry-After.
//   - [LeakyBucket]: nginx's limit_req without burst: one request per
//     interval on a millisecond clock, a bare 503 (or 429), no header.
//   - [SlidingWindow]: go-chi/httprate's weighted sliding-window counter,
//     X-RateLimit-Limit/-Remaining/-Reset (epoch seconds, or delta
//     seconds), Retry-After: 1.
//   - [FixedWindow]: clock-aligned windows announced with the IETF
//     RateLimit and RateLimit-Policy fields (draft-ietf-httpapi-ratelimit-headers),
//     t rounded up to whole seconds, an optional skewed Date.
//   - [SlidingLog]: at most q in any rolling window, a 429 with only
//     Retry-After: the hidden budget below what a client was told.
//   - [GitHub]: a long window (5,000 an hour), started part-spent,
//     x-ratelimit-limit/-remaining/-reset/-used/-resource, 403 past it;
//     optionally the secondary limit (403 with Retry-After: 60).
//   - [OpenAI]: requests and tokens per minute as continuously refilling
//     buckets, x-ratelimit-*-requests/-tokens with resets as the time
//     until full ("6s", "167ms"), 429 with retry-after-ms and
//     retry-after, the token cost read from the JSON body's max_tokens
//     and reported back in a usage body.
//   - [Usage]: tokens per minute counted as used: the estimate
//     (max_tokens) taken at admission, the usage when the completion is
//     done (a client that settles its costs is paced exactly), 429 with
//     retry-after-ms and retry-after.
//   - [InFlight]: a cap on concurrent requests, each served for a hold
//     time; a bare 429, or one with Retry-After.
//   - [Chain]: several limits at once, layered as middleware (a
//     per-second bucket in front of an hourly budget); the first refusal
//     answers, the headers of every layer passed are sent.
//
// Each is made by its constructor, which takes the limit; the other
// fields are options, set before the first request. Every server is an
// [http.Handler] safe for concurrent use, and embeds a [Counter]:
// arrivals, admissions and refusals ([Counter.Stats]), the time of every
// admission, the most admitted in any interval of a length
// ([Counter.MaxIn]), per window ([Counter.PerWindow]) and per client
// ([Counter.PerWorker], by the [WorkerHeader] request header).
//
// # Time
//
// A server reads its clock from its Now field; nil means time.Now. Inside
// a testing/synctest bubble time.Now is the bubble's fake clock, so a
// client and a server both in the bubble run on fake time: exact,
// repeatable, and a minute of traffic in milliseconds. [Direct] serves
// requests in the calling goroutine (a goroutine blocked on a real socket
// keeps a bubble from ever going idle), with an optional latency and a
// seeded jitter. A bubble's clock starts at 2000-01-01, when epoch seconds
// are below 1e9: a parser that tells an epoch reset from a delay by its
// size (throttle's does) reads [SlidingWindow]'s and [GitHub]'s resets as
// delays there, so move the bubble's clock to the present first, e.g.
// time.Sleep(time.Until(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))),
// which is instant in a bubble.
//
// # Today's Transport against these servers
//
// The project's own measurement (THROTTLE_SERVERS=1 go test -run
// TestServersTable -v ./throttletest; medians of 3 runs, in synctest
// unless marked real clock; closed-loop workers) of throttle.Transport
// before the scheduler learns from servers (issue 9), as the baseline
// improvements are measured against. Capacity used is admissions ÷ what
// the server's rule admits in the run's wall time.
//
//	server, client                                        capacity  429s/success  give-ups  p99      goal
//	token bucket 100/s b10 + Retry-After, limit told      1.00      0             0         160ms    0 429s, ≥ 0.99
//	  same, ≤ 1 ms dispatch jitter                        0.39      0.017         0         2.1s     0 429s, ≥ 0.99
//	strict leaky bucket 50/s (nginx), limit told, ≤ 1 ms  0.73      0.014         0         590ms    ≤ 1% 429s, ≥ 0.97
//	  same, refusing with nginx's default 503             0.73      0.014         0         559ms    ≤ 1% 429s, ≥ 0.97
//	  same (429), real clock                              0.80      0.010         0         297ms    ≤ 1% 429s, ≥ 0.97
//	sliding window 50/1 s (httprate), told nothing        0.64      0.46          16%       1.0s     all succeed, ≤ 1%, ≥ 0.95
//	fixed window 50/1 s, IETF, t rounded up, Date +1.5 s  1.00      0.015         0         1.0s     ≤ 1% 429s, ≥ 0.95
//	  same, 1 worker                                      0.91      0             0         1.0s     ≤ 1% 429s, ≥ 0.95
//	sliding log 20/1 s, told 100/s, 1 process             0.91      0.048         0         1.1s     ≤ 2%, within 5% of the time (today 1.12×)
//	  same, fleet of 4 distributed.Limiter, real clock    0.91      0.050         0         1.1s     ≤ 2%, within 5% of the time (today 1.12×)
//	GitHub, 450 of 5,000 left, reset in 50 min            all 450 spent by 3m39s (33 in the first 4 s) the 450 spread over 50 min
//	OpenAI 60 RPM/6,000 TPM, 202 tokens, told nothing     1.00      6.0           78%       9.9s     ≥ 0.95, ≤ 1% 429s
//	  same, CostUnit "tokens" with the exact Cost         0.85      0             0         61s      ≥ 0.95, ≤ 1% 429s
//	OpenAI, 22 tokens (requests bind), told nothing       0.76      0             0         65s      ≥ 0.95, ≤ 1% 429s
//
// What the Transport's events say (the table's events column): the strict
// bucket's 14 refusals cost 7.4 s on top of the 20 s the limit implies,
// about half a second each; with 1 ms
// of jitter each of the token bucket's 34 429s (Retry-After: 1, for a
// token 1 ms away) pauses the key a whole second; the sliding window's
// give-ups are all "retry budget spent" (416 pauses of 1 s); a fixed
// window's remaining-0 response with t=1 pauses up to a second past the
// true reset (1 worker: 0.91), and with 16 workers the requests in flight
// at a window's end draw about one 429 a window (the Date skew changes
// nothing: t is relative); GitHub's give-ups are "server asked to wait
// longer than MaxRetryAfter" (45) after the 450 went in 3m39s; OpenAI
// told nothing gives up on the retry budget (424 of 426) as 8 workers
// resume together at each pause's end, and a 200 with remaining 0 pauses
// the key until the bucket is full (p99 61–65 s).
package throttletest
