// Package sdktest holds local fakes of the GitHub REST API and the OpenAI
// API that answer rate limits as the real ones do, and the tests that drive
// them through the real client libraries (github.com/google/go-github and
// github.com/openai/openai-go) with a [throttle.Transport] installed.
//
// It is a module of its own, so that the core module does not depend on
// the client libraries. A fake ([NewGitHub], [NewOpenAI]) is a [Fake]: an
// [http.Handler] and an [http.RoundTripper] that serves requests
// in-process, on any host. Install it as the client's transport (or a
// throttle.Transport's Base) and the tests run inside testing/synctest
// bubbles, on a fake clock: the resets and retries they wait for take no
// real time, and their durations are exact. Read what a fake saw with its
// counting methods.
//
// # What the fakes send
//
// GitHub (https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api):
// x-ratelimit-limit, -remaining, -used, -reset (epoch seconds) and
// -resource on every response; a spent primary limit is a 403 (or 429)
// with x-ratelimit-remaining: 0 and the documented message; a secondary
// limit is a 403 with retry-after (seconds) and the "secondary rate
// limit" message and documentation URL go-github recognises.
//
// OpenAI (https://platform.openai.com/docs/guides/rate-limits):
// x-ratelimit-limit-, -remaining- and -reset-requests and -tokens on every
// response, resets as durations ("1s", "167ms", "6m0s"); a spent limit is
// a 429 with retry-after (whole seconds, rounded up), retry-after-ms and
// x-should-retry: true; a spent account is a permanent 429
// (insufficient_quota) with x-should-retry: false.
//
// [throttle.Transport]: https://pkg.go.dev/github.com/throttle-go/throttle#Transport
package sdktest
