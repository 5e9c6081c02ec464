// Package servertest measures throttle's Transport against the
// server-side rate limiters Go services and proxies deploy: the
// middlewares go-chi/httprate, ulule/limiter, sethvargo/go-limiter,
// throttled/throttled and didip/tollbooth, served in-process on loopback,
// and nginx's limit_req (with and without burst), run as a real nginx
// process. It is a module of its own so that the core keeps its few
// dependencies; it holds tests only.
//
// Each server gets parameters drawn from a seed (counts, window lengths
// including 7 s and 10 s, rates, bursts, a phase, a skewed Date where
// every rate-limit header it sends is relative), and is met by workers
// sharing one Transport, closed loop, a fixed number of requests: once
// with the client told the server's limit (a [throttle.Limiter] with the
// matching [throttle.Limit]) and once told nothing (the zero Transport).
// A row reports the capacity used (successes ÷ what the server's own
// rule admits between the run's start and end), the 429s per success,
// the requests that did not end in a success, and the run's wall time ÷
// the least time the server's rule needs for its requests.
//
// The default run (go test, about 20 s) holds a few rows to the goals
// (≥ 0.95 of capacity, ≤ 1% 429s per success, every request done), and
// checks what each server sends. THROTTLE_LONG=1 runs the whole matrix (every server,
// told and told nothing, three seeds, the median row of the three; about
// 15 minutes with -parallel 1) and logs it as a Markdown table;
// THROTTLE_MATRIX_TABLE=1 prints the table alone on standard output, and
// any other value is a file to write it to. From this directory:
//
//	THROTTLE_LONG=1 THROTTLE_MATRIX_TABLE=matrix.md go test -count=1 -run 'TestMatrix$' -parallel 1 -timeout 60m
//
// TestMatrixRow traces one row (THROTTLE_MATRIX_ROW='kind;told' or
// 'kind;told nothing'): every attempt with its headers and every event
// of the Transport, in order. Built with -tags fleet, TestMatrixFleet
// runs the matrix with a fleet of four processes sharing a quota
// through the distributed package on a real redis-server.
//
// nginx comes from the machine's packages (./test.sh installs it with
// apt); where it is missing, the nginx rows fail when CI is set and are
// skipped otherwise.
package servertest
