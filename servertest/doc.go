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
// and the requests that did not end in a success.
//
// The default run (go test ./...) measures a few rows and holds them to
// the goals the library meets today. THROTTLE_LONG=1 runs the whole
// matrix (every server, told and told nothing, three seeds, the median
// row of the three) and logs it as a Markdown table;
// THROTTLE_MATRIX_TABLE=1 prints the table alone on standard output:
//
//	THROTTLE_LONG=1 THROTTLE_MATRIX_TABLE=1 go test -count=1 -run TestMatrix ./servertest
//
// nginx comes from the machine's packages (./test.sh installs it with
// apt); where it is missing, the nginx rows fail when CI is set and are
// skipped otherwise.
package servertest
