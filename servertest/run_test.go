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
	told         bool   // the client was told the server's limit
	fleet        string // "" for one process, else the fleet's name
	seed         uint64
	requests     int
	workers      int

	// Attempts by what the server answered, as the clients' Base saw
	// them: successes, 429s, anything else (errors included).
	ok, rejected, other int
	// unfinished: requests that did not end in a success (given up, or
	// still unanswered when the run's bound ended it).
	unfinished int
	capacity   float64 // successes ÷ what the server admits in the run's time
	perOK      float64 // 429s per success
	// slowdown is the run's wall time ÷ the least time in which the
	// server's rule admits all its requests.
	slowdown float64
	wall     time.Duration
	events   *eventLog
	trace    *attempts
}

// client names the client of r.
func (r run) client() string {
	c := "told nothing"
	if r.told {
		c = "told"
	}
	if r.fleet != "" {
		c += ", " + r.fleet
	}
	return c
}

// runBound bounds a run of target length d: a run that needs longer
// stops, and its requests not done count as unfinished.
func runBound(d time.Duration) time.Duration { return 2*d + 5*time.Second }

// clients makes the Waiters of a run's processes, one per process, each
// process's own: told the server's limits told, or (told nil) told
// nothing. A nil Waiter is the zero Transport's.
type clients struct {
	name string // "" for one process
	make func(t *testing.T, told []throttle.Limit) []throttle.Waiter
}

// oneProcess is one process: a Limiter with the server's limits, or
// nothing.
var oneProcess = clients{make: func(t *testing.T, told []throttle.Limit) []throttle.Waiter {
	if told == nil {
		return []throttle.Waiter{nil}
	}
	return []throttle.Waiter{&throttle.Limiter{Limits: told}}
}}

// measureRun starts a server of kind k with the parameters seed draws,
// and runs c's processes against it: a Transport each, shared by their
// part of workers goroutines (drawn too), closed loop, until their part
// of the requests is done or the run's bound ends; with the client told
// the server's limit, or told nothing.
func measureRun(t *testing.T, k kind, seed uint64, told bool, d time.Duration, c clients) run {
	t.Helper()
	h := fnv.New64a()
	h.Write([]byte(k.name))
	rng := rand.New(rand.NewPCG(seed, h.Sum64()))
	s := k.start(t, rng, d)
	workers := 4 + rng.IntN(13)

	var limits []throttle.Limit
	if told {
		limits = s.told
	}
	waiters := c.make(t, limits)
	trace := &attempts{}
	ev := &eventLog{}
	loads := make([]measure.Load, len(waiters))
	for i, w := range waiters {
		base := &http.Transport{MaxIdleConnsPerHost: workers, IdleConnTimeout: time.Minute}
		defer base.CloseIdleConnections()
		tr := &throttle.Transport{Base: logged{base, trace}, OnEvent: ev.record, Waiter: w}
		// Workers and requests shared out, the first processes taking
		// what does not divide.
		n, ws := len(waiters), workers/len(waiters)
		if i < workers%n {
			ws++
		}
		rs := s.requests / n
		if i < s.requests%n {
			rs++
		}
		loads[i] = measure.Load{Client: &http.Client{Transport: tr}, URL: s.url, Workers: max(ws, 1), Requests: rs}
	}

	if s.phase > 0 {
		time.Sleep(s.phase) // where the run starts in the server's windows
	}
	ctx, cancel := context.WithTimeout(t.Context(), runBound(d))
	defer cancel()
	trace.start = time.Now()
	ev.start = trace.start
	var (
		mu        sync.Mutex
		done      int
		wall      time.Duration
		processes sync.WaitGroup
	)
	for _, l := range loads {
		processes.Go(func() {
			res := measure.Run(ctx, l)
			mu.Lock()
			defer mu.Unlock()
			done += res.OK
			wall = max(wall, res.Wall)
		})
	}
	processes.Wait()
	end := trace.start.Add(wall)

	r := run{kind: k.name, params: s.params, told: told, fleet: c.name, seed: seed, requests: s.requests, workers: workers,
		unfinished: s.requests - done, wall: wall, events: ev, trace: trace}
	r.ok, r.rejected, r.other = trace.counts()
	if a := s.admits(trace.start, end); a > 0 {
		r.capacity = float64(r.ok) / a
	}
	if r.ok > 0 {
		r.perOK = float64(r.rejected) / float64(r.ok)
	}
	if least := leastTime(s, trace.start, runBound(d)); least > 0 {
		r.slowdown = wall.Seconds() / least.Seconds()
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

// attempts keeps what the server answered each attempt of a run, and
// when.
type attempts struct {
	start time.Time // the run's start

	mu  sync.Mutex // protects log
	log []attempt
}

// logged is a client's Base: it sends each attempt through base and
// keeps it in log.
type logged struct {
	base http.RoundTripper
	log  *attempts
}

// attempt is one attempt as the Base saw it.
type attempt struct {
	sent, received time.Duration // from the run's start
	status         int           // 0: an error
	header         http.Header
}

func (l logged) RoundTrip(req *http.Request) (*http.Response, error) {
	a := l.log
	sent := time.Since(a.start)
	resp, err := l.base.RoundTrip(req)
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
