package servertest

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/internal/measure"
)

// run is one run of a client against one server.
type run struct {
	kind, params string
	told         bool // the client was told the server's limit
	seed         uint64
	requests     int
	workers      int

	// Attempts by what the server answered, as the client's Base saw
	// them: successes, 429s, anything else (errors included).
	ok, rejected, other int
	// unfinished: requests that did not end in a success (given up, or
	// still unanswered when the run's bound ended it).
	unfinished int
	capacity   float64 // successes ÷ what the server admits in the run's time
	// slowdown is the run's wall time ÷ the least time in which the
	// server's rule admits all its requests.
	slowdown float64
	perOK    float64 // 429s per success
	wall     time.Duration
	events   *eventLog
	trace    *attempts
}

// label names the client of r.
func (r run) client() string {
	if r.told {
		return "told"
	}
	return "told nothing"
}

// runBound bounds a run of target length d: a run that needs longer
// stops, and its requests not done count as unfinished.
func runBound(d time.Duration) time.Duration { return 3*d + 10*time.Second }

// measureRun starts a server of kind k with the parameters seed draws,
// and runs one Transport against it, shared by workers goroutines (drawn
// too), closed loop, until its requests are done or the run's bound
// ends: with the client told the server's limit, or told nothing.
func measureRun(t *testing.T, k kind, seed uint64, told bool, d time.Duration) run {
	t.Helper()
	h := fnv.New64a()
	h.Write([]byte(k.name))
	rng := rand.New(rand.NewPCG(seed, h.Sum64()))
	s := k.start(t, rng, d)
	workers := 4 + rng.IntN(13)

	base := &http.Transport{MaxIdleConnsPerHost: workers, IdleConnTimeout: time.Minute}
	defer base.CloseIdleConnections()
	trace := &attempts{base: base}
	ev := &eventLog{}
	tr := &throttle.Transport{Base: trace, OnEvent: ev.record}
	if told {
		tr.Waiter = &throttle.Limiter{Limits: s.told}
	}
	client := &http.Client{Transport: tr}

	if s.phase > 0 {
		time.Sleep(s.phase) // where the run starts in the server's windows
	}
	ctx, cancel := context.WithTimeout(t.Context(), runBound(d))
	defer cancel()
	trace.start = time.Now()
	ev.start = trace.start
	res := measure.Run(ctx, measure.Load{Client: client, URL: s.url, Workers: workers, Requests: s.requests})
	end := trace.start.Add(res.Wall)

	r := run{kind: k.name, params: s.params, told: told, seed: seed, requests: s.requests, workers: workers,
		unfinished: s.requests - res.OK, wall: res.Wall, events: ev, trace: trace}
	r.ok, r.rejected, r.other = trace.counts()
	if a := s.admits(trace.start, end); a > 0 {
		r.capacity = float64(r.ok) / a
	}
	if r.ok > 0 {
		r.perOK = float64(r.rejected) / float64(r.ok)
	}
	if ideal := leastTime(s, trace.start, runBound(d)); ideal > 0 {
		r.slowdown = res.Wall.Seconds() / ideal.Seconds()
	}
	return r
}

// leastTime returns the least time from start in which s's rule admits
// its requests (to a millisecond), or 0 if not within bound.
func leastTime(s *server, start time.Time, bound time.Duration) time.Duration {
	lo, hi := time.Duration(0), bound
	if s.admits(start, start.Add(hi)) < float64(s.requests) {
		return 0
	}
	for hi-lo > time.Millisecond {
		mid := (lo + hi) / 2
		if s.admits(start, start.Add(mid)) >= float64(s.requests) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// attempts is the client's Base: it sends each attempt through base
// and keeps what the server answered, and when.
type attempts struct {
	base  http.RoundTripper
	start time.Time

	mu  sync.Mutex // protects log
	log []attempt
}

// attempt is one attempt as the Base saw it.
type attempt struct {
	sent, received time.Duration // from the run's start
	status         int           // 0: an error
	header         http.Header
}

func (a *attempts) RoundTrip(req *http.Request) (*http.Response, error) {
	sent := time.Since(a.start)
	resp, err := a.base.RoundTrip(req)
	at := attempt{sent: sent, received: time.Since(a.start)}
	if err == nil {
		at.status, at.header = resp.StatusCode, resp.Header.Clone()
	}
	a.mu.Lock()
	a.log = append(a.log, at)
	a.mu.Unlock()
	return resp, err
}

// counts returns the attempts answered with a 2xx, a 429, and anything
// else.
func (a *attempts) counts() (ok, rejected, other int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, at := range a.log {
		switch {
		case at.status/100 == 2:
			ok++
		case at.status == http.StatusTooManyRequests:
			rejected++
		default:
			other++
		}
	}
	return ok, rejected, other
}

// eventLog keeps a Transport's events: counts by kind and give-up
// reason, and the pauses' total and longest.
type eventLog struct {
	measure.Events
	start    time.Time  // the run's start
	mu       sync.Mutex // protects the fields below
	pauses   []time.Duration
	declared []string // the paces adopted, in order
	log      []event  // every event but waits, in order
}

// event is one event of a Transport, when it came.
type event struct {
	at time.Duration // from the run's start
	throttle.Event
}

func (e *eventLog) record(ev throttle.Event) {
	e.Events.Record(ev)
	e.mu.Lock()
	defer e.mu.Unlock()
	if ev.Kind != throttle.EventWait {
		e.log = append(e.log, event{at: time.Since(e.start), Event: ev})
	}
	switch ev.Kind {
	case throttle.EventPause:
		e.pauses = append(e.pauses, ev.Delay)
	case throttle.EventDeclared:
		e.declared = append(e.declared, fmt.Sprintf("%.3g/s b%d", float64(ev.Rate), ev.Burst))
	}
}

// pauseSummary describes the pauses: how many, their total, the
// shortest, median and longest.
func (e *eventLog) pauseSummary() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.pauses) == 0 {
		return "no pause"
	}
	p := slices.Clone(e.pauses)
	slices.Sort(p)
	var sum time.Duration
	for _, d := range p {
		sum += d
	}
	r := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	return fmt.Sprintf("%d pauses, %v in all, min %v, median %v, max %v", len(p), r(sum), r(p[0]), r(p[len(p)/2]), r(p[len(p)-1]))
}

// declaredSummary lists the distinct paces adopted, in order.
func (e *eventLog) declaredSummary() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, d := range e.declared {
		if len(out) == 0 || out[len(out)-1] != d {
			out = append(out, d)
		}
	}
	return strings.Join(out, " → ")
}
