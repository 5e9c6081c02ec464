// Package measure drives a client against a server of package throttletest
// and reports what the issue-9 table asks: the fraction of the server's
// capacity used, 429s per success, give-ups, latency. It runs inside a
// testing/synctest bubble (with throttletest.Direct as the client's Base)
// or on the real clock against an httptest server alike: it reads only
// time.Now and the client.
package measure

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/throttle-go/throttle/throttletest"
)

// Load is a closed-loop workload: Workers goroutines each send one request,
// wait for its answer, and send the next, until Requests have been started
// in all or For has passed since the start, whichever comes first.
type Load struct {
	Client   *http.Client
	URL      string
	Workers  int           // zero means 1
	Requests int           // first attempts to start in all; zero means no bound
	For      time.Duration // no request starts after this; zero means no bound
	Body     string        // a POST body (with GetBody, so it can be retried); "" sends GETs
	Worker   string        // the throttletest.WorkerHeader value; "" sends none
}

// Result is what the client saw.
type Result struct {
	Sent      int             // requests started, as the user sees them (retries are inside)
	OK        int             // ended in a 2xx
	GaveUp    int             // ended in another status or an error
	Errors    int             // of GaveUp, ended in an error
	Wall      time.Duration   // from the start to the last answer
	Latencies []time.Duration // each request's, retries and waits included, sorted
	Done      []time.Duration // when each 2xx ended, from the start, sorted
}

// Quantile returns the q-quantile of the latencies (nearest rank), 0 when
// there are none.
func (r Result) Quantile(q float64) time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	i := int(q*float64(len(r.Latencies))+0.999999) - 1
	return r.Latencies[min(max(i, 0), len(r.Latencies)-1)]
}

// Run runs l and returns what the client saw.
func Run(ctx context.Context, l Load) Result {
	var (
		mu      sync.Mutex
		res     Result
		started int
	)
	start := time.Now()
	take := func() bool {
		mu.Lock()
		defer mu.Unlock()
		if l.Requests > 0 && started >= l.Requests {
			return false
		}
		if l.For > 0 && time.Since(start) >= l.For {
			return false
		}
		started++
		return true
	}
	var wg sync.WaitGroup
	for range max(l.Workers, 1) {
		wg.Go(func() {
			for take() && ctx.Err() == nil {
				t0 := time.Now()
				status, err := do(ctx, l)
				end := time.Now()
				mu.Lock()
				res.Sent++
				res.Latencies = append(res.Latencies, end.Sub(t0))
				switch {
				case err != nil:
					res.GaveUp++
					res.Errors++
				case status/100 == 2:
					res.OK++
					res.Done = append(res.Done, end.Sub(start))
				default:
					res.GaveUp++
				}
				res.Wall = max(res.Wall, end.Sub(start))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(res.Latencies)
	slices.Sort(res.Done)
	return res
}

func do(ctx context.Context, l Load) (int, error) {
	method := http.MethodGet
	var body io.Reader
	if l.Body != "" {
		method, body = http.MethodPost, strings.NewReader(l.Body)
	}
	req, err := http.NewRequestWithContext(ctx, method, l.URL, body)
	if err != nil {
		return 0, err
	}
	if l.Worker != "" {
		req.Header.Set(throttletest.WorkerHeader, l.Worker)
	}
	resp, err := l.Client.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// Row is one line of the table: one server, one client setup.
type Row struct {
	Name         string
	Capacity     float64       // admitted ÷ what the server's rule allows in the run's wall time
	RejectsPerOK float64       // refusals the server sent ÷ admissions
	GiveUps      float64       // requests ending in a refusal or error ÷ requests
	P99          time.Duration // of the requests' latencies
	Wall         time.Duration
	Extra        string // what the row's goal needs beyond the columns
	Events       string // the Transport's events by kind, give-ups by reason (see Events)
	Goal         string

	Sent, OK           int // requests the client started, and ended in a 2xx
	Admitted, Rejected int // as the server counted them
}

// Median returns, column by column, the median of rows (of the same
// scenario run several times); Name, Goal, Extra and Events come from the median
// run by capacity.
func Median(rows []Row) Row {
	if len(rows) == 0 {
		return Row{}
	}
	med := func(f func(Row) float64) float64 {
		v := make([]float64, len(rows))
		for i, r := range rows {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	by := slices.Clone(rows)
	slices.SortFunc(by, func(a, b Row) int {
		switch {
		case a.Capacity < b.Capacity:
			return -1
		case a.Capacity > b.Capacity:
			return 1
		}
		return 0
	})
	out := by[len(by)/2]
	out.Capacity = med(func(r Row) float64 { return r.Capacity })
	out.RejectsPerOK = med(func(r Row) float64 { return r.RejectsPerOK })
	out.GiveUps = med(func(r Row) float64 { return r.GiveUps })
	out.P99 = time.Duration(med(func(r Row) float64 { return float64(r.P99) }))
	out.Wall = time.Duration(med(func(r Row) float64 { return float64(r.Wall) }))
	return out
}

// Table formats rows as a Markdown table.
func Table(rows []Row) string {
	var b strings.Builder
	b.WriteString("| server, client | capacity used | 429s per success | give-ups | p99 | wall | also | events | goal |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %.2f | %.3f | %.1f%% | %v | %v | %s | %s | %s |\n",
			r.Name, r.Capacity, r.RejectsPerOK, 100*r.GiveUps, r.P99.Round(time.Millisecond), r.Wall.Round(10*time.Millisecond), r.Extra, r.Events, r.Goal)
	}
	return b.String()
}
