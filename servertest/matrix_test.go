package servertest

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The goals of issue 24 for a row: at least this share of the server's
// capacity, at most this many 429s per success, every request done.
const (
	goalCapacity = 0.95
	goalPerOK    = 0.01
)

// seed returns the run's first seed: THROTTLE_SEED, else 1.
func seed(t *testing.T) uint64 {
	if v := os.Getenv("THROTTLE_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("THROTTLE_SEED=%q: %v", v, err)
		}
		return s
	}
	return 1
}

// check is a row of the default run and the bound it is held to.
type check struct {
	kind string
	told bool
	// capacity and perOK are the bounds: at least capacity, at most
	// perOK 429s per success, and every request done.
	capacity, perOK float64
	why             string
}

// checks are the rows of the default run: the servers where the library
// meets the goals today, held to them (with the margin a busy
// 2-core machine needs, stated in why), and the told-nothing rows that do
// not, held to what they do today so that a regression shows.
var checks = []check{
	{kind: "tollbooth", told: true, capacity: goalCapacity, perOK: goalPerOK,
		why: "told tollbooth's rate and burst, the client's bucket is the server's (x/time/rate both)"},
	{kind: "tollbooth", told: false, capacity: goalCapacity, perOK: goalPerOK,
		why: "told nothing, RateLimit-Limit with RateLimit-Reset: 1 declares tollbooth's rate"},
	{kind: "nginx limit_req burst nodelay", told: true, capacity: goalCapacity, perOK: goalPerOK,
		why: "told nginx's rate and burst+1, the burst absorbs the dispatch jitter a strict server without one refuses"},
}

// shortRun is the target length of a default run: windows of 1 to 3 s.
const shortRun = 6 * time.Second

// TestMatrix runs, by default, the rows of checks once each (seed 1, or
// THROTTLE_SEED) and holds each to its bound. With THROTTLE_LONG=1 it
// runs the whole matrix: every server, told and told nothing, three
// seeds, and logs the median rows as a Markdown table (and prints it
// alone on standard output with THROTTLE_MATRIX_TABLE=1, or writes it to
// the file THROTTLE_MATRIX_TABLE names).
func TestMatrix(t *testing.T) {
	if os.Getenv("THROTTLE_LONG") == "1" {
		longMatrix(t, oneProcess)
		return
	}
	s := seed(t)
	for _, c := range checks {
		name := c.kind + ", " + map[bool]string{true: "told", false: "told nothing"}[c.told]
		t.Run(name, func(t *testing.T) {
			k := kindNamed(c.kind)
			r := measureRun(t, k, s, c.told, shortRun, oneProcess)
			t.Logf("%s", describe(r))
			if r.unfinished > 0 || r.capacity < c.capacity || r.perOK > c.perOK {
				t.Errorf("%s %s (seed %d, %d workers): capacity used %.3f, %.4f 429s per success, %d of %d unfinished; want ≥ %.2f, ≤ %.3f, none unfinished (%s)",
					c.kind, r.params, r.seed, r.workers, r.capacity, r.perOK, r.unfinished, r.requests, c.capacity, c.perOK, c.why)
			}
		})
	}
}

// longRun is the target length of a run of the whole matrix: windows up
// to 10 s, two of them at least.
const longRun = 20 * time.Second

// longMatrix runs every server, told and told nothing, with c's
// processes and three seeds from the first (THROTTLE_SEED), rows two at
// a time (t.Parallel; go test's -parallel sets how many: 1 for the
// figures of docs/measurements.md, which a neighbour's load would
// perturb), and reports the median row of each.
func longMatrix(t *testing.T, c clients) {
	first := seed(t)
	var (
		mu   sync.Mutex
		rows []row
	)
	t.Run("rows", func(t *testing.T) {
		for _, k := range kinds {
			for _, told := range []bool{true, false} {
				t.Run(k.name+", "+map[bool]string{true: "told", false: "told nothing"}[told], func(t *testing.T) {
					t.Parallel()
					var runs []run
					for i := range uint64(3) {
						t.Run(fmt.Sprintf("seed %d", first+i), func(t *testing.T) {
							r := measureRun(t, k, first+i, told, longRun, c)
							t.Logf("%s", describe(r))
							runs = append(runs, r)
						})
					}
					if len(runs) == 0 {
						return // skipped (no nginx)
					}
					mu.Lock()
					rows = append(rows, median(runs))
					mu.Unlock()
				})
			}
		}
	})
	slices.SortFunc(rows, func(a, b row) int {
		return strings.Compare(a.order(), b.order())
	})
	table := markdown(rows)
	t.Logf("medians of 3 seeds:\n%s", table)
	printTable(t, table)
}

// printTable prints table alone on standard output if
// THROTTLE_MATRIX_TABLE is 1, or writes it to the file it names.
func printTable(t *testing.T, table string) {
	switch dest := os.Getenv("THROTTLE_MATRIX_TABLE"); dest {
	case "":
	case "1":
		fmt.Print(table)
	default:
		if err := os.WriteFile(dest, []byte(table), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// row is one line of the table: the median of a server's runs with one
// client.
type row struct {
	median           run
	runs             []run
	capLo, capHi     float64
	perOKLo, perOKHi float64
	unfinished       int // the most of any run
}

// order sorts rows as the kinds are listed, told first.
func (r row) order() string {
	for i, k := range kinds {
		if k.name == r.median.kind {
			return fmt.Sprintf("%02d %v", i, !r.median.told)
		}
	}
	return r.median.kind
}

// median returns the row of runs: the run of median capacity, and the
// ranges over all.
func median(runs []run) row {
	by := slices.Clone(runs)
	slices.SortFunc(by, func(a, b run) int {
		switch {
		case a.capacity < b.capacity:
			return -1
		case a.capacity > b.capacity:
			return 1
		}
		return 0
	})
	r := row{median: by[len(by)/2], runs: runs, capLo: by[0].capacity, capHi: by[len(by)-1].capacity}
	r.perOKLo, r.perOKHi = runs[0].perOK, runs[0].perOK
	for _, x := range runs {
		r.perOKLo, r.perOKHi = min(r.perOKLo, x.perOK), max(r.perOKHi, x.perOK)
		r.unfinished = max(r.unfinished, x.unfinished)
	}
	return r
}

// meets reports whether a run meets the goals.
func meets(capacity, perOK float64, unfinished int) bool {
	return capacity >= goalCapacity && perOK <= goalPerOK && unfinished == 0
}

// markdown formats rows as the matrix's table.
func markdown(rows []row) string {
	var b strings.Builder
	b.WriteString("| server | parameters (median run) | client | capacity used | 429s per success | unfinished | goal met | wall ÷ least | capacity · 429s per success · unfinished, each seed |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range rows {
		m := r.median
		var seeds []string
		for _, x := range r.runs {
			seeds = append(seeds, fmt.Sprintf("%.2f · %.3f · %d", x.capacity, x.perOK, x.unfinished))
		}
		met := "yes"
		if !meets(m.capacity, m.perOK, r.unfinished) {
			met = "no"
		}
		fmt.Fprintf(&b, "| %s | %s; %d workers, %d requests | %s | %.2f | %.3f | %d | %s | %.2f | %s |\n",
			m.kind, m.params, m.workers, m.requests, m.client(), m.capacity, m.perOK, m.unfinished, met, m.slowdown, strings.Join(seeds, "; "))
	}
	return b.String()
}

// describe is one run in a line of the log.
func describe(r run) string {
	d := r.events.declaredSummary()
	if d != "" {
		d = "; declared " + d
	}
	return fmt.Sprintf("%s %s, %s, seed %d, %d workers, %d requests: capacity %.3f, %d ok, %d 429s (%.4f a success), %d other, %d unfinished, wall %v (%.2f× the least); events: %s; %s%s",
		r.kind, r.params, r.client(), r.seed, r.workers, r.requests, r.capacity, r.ok, r.rejected, r.perOK, r.other, r.unfinished,
		r.wall.Round(10*time.Millisecond), r.slowdown, r.events.String(), r.events.pauseSummary(), d)
}
