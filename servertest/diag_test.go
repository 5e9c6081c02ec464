package servertest

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/throttle-go/throttle"
)

// TestMatrixRow runs one row of the matrix once and logs its timeline,
// for diagnosis: every attempt (when sent and answered, the status, the
// rate-limit fields) and every event of the Transport but waits, in
// order, then the successes and 429s of each second. It runs only when
// THROTTLE_MATRIX_ROW names the row, as "kind;told" or "kind;told
// nothing"; THROTTLE_SEED sets the seed, THROTTLE_MATRIX_LENGTH the run's
// target length (a duration, default 20s), THROTTLE_MATRIX_LINES how many
// lines of the timeline are logged (default 300):
//
//	THROTTLE_MATRIX_ROW='throttled GCRA;told' go test -count=1 -run TestMatrixRow -v
func TestMatrixRow(t *testing.T) {
	spec := os.Getenv("THROTTLE_MATRIX_ROW")
	if spec == "" {
		t.Skip("set THROTTLE_MATRIX_ROW='kind;told' or 'kind;told nothing' to trace one row")
	}
	name, client, _ := strings.Cut(spec, ";")
	length := longRun
	if v := os.Getenv("THROTTLE_MATRIX_LENGTH"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("THROTTLE_MATRIX_LENGTH=%q: %v", v, err)
		}
		length = d
	}
	lines := 300
	if v := os.Getenv("THROTTLE_MATRIX_LINES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("THROTTLE_MATRIX_LINES=%q: %v", v, err)
		}
		lines = n
	}
	r := measureRun(t, kindNamed(name), seed(t), client == "told", length, oneProcess)
	t.Logf("%s", describe(r))
	t.Logf("timeline (first %d lines):\n%s", lines, timeline(r, lines))
	t.Logf("each second (200s/429s, events):\n%s", perSecond(r))
}

// timeline merges r's attempts and events in time order, one a line.
func timeline(r run, n int) string {
	type line struct {
		at   time.Duration
		text string
	}
	var ls []line
	r.trace.mu.Lock()
	for _, a := range r.trace.log {
		ls = append(ls, line{a.received, fmt.Sprintf("%4d sent %9.3fs %s", a.status, a.sent.Seconds(), compact(a))})
	}
	r.trace.mu.Unlock()
	r.events.mu.Lock()
	for _, e := range r.events.log {
		ls = append(ls, line{e.at, "     event " + describeEvent(e.Event)})
	}
	r.events.mu.Unlock()
	slices.SortStableFunc(ls, func(a, b line) int { return int(a.at - b.at) })
	var b strings.Builder
	for i, l := range ls {
		if i == n {
			break
		}
		fmt.Fprintf(&b, "%9.3fs %s\n", l.at.Seconds(), l.text)
	}
	return b.String()
}

// compact is an attempt's rate-limit fields in a short form.
func compact(a attempt) string {
	if a.header == nil {
		return ""
	}
	var parts []string
	for _, k := range rateFields(a.header) {
		if k == "X-Rate-Limit-Request-Remote-Addr" {
			continue
		}
		short := strings.NewReplacer("X-Ratelimit-", "x-", "X-Rate-Limit-", "x-", "Ratelimit-", "rl-", "Retry-After", "ra").Replace(k)
		parts = append(parts, short+"="+strings.Join(a.header.Values(k), ","))
	}
	if d := a.header.Get("Date"); d != "" && len(d) > 17 {
		parts = append(parts, "date="+d[17:25])
	}
	return strings.Join(parts, " ")
}

// describeEvent is an event in a short form.
func describeEvent(e throttle.Event) string {
	s := e.Kind.String()
	if e.Delay != 0 {
		s += fmt.Sprintf(" delay %v", e.Delay.Round(time.Millisecond))
	}
	if e.Rate != 0 || e.Burst != 0 {
		s += fmt.Sprintf(" rate %.3g burst %d", e.Rate, e.Burst)
	}
	if e.Remaining != 0 {
		s += fmt.Sprintf(" remaining %g", e.Remaining)
	}
	if e.StatusCode != 0 {
		s += fmt.Sprintf(" status %d", e.StatusCode)
	}
	if e.Reason != "" {
		s += " (" + e.Reason + ")"
	}
	return s
}

// perSecond counts r's successes and 429s by the second they were
// answered in, with the events of that second by kind.
func perSecond(r run) string {
	type sec struct {
		ok, rejected int
		events       map[string]int
	}
	var secs []sec
	at := func(d time.Duration) *sec {
		i := int(d / time.Second)
		for len(secs) <= i {
			secs = append(secs, sec{events: map[string]int{}})
		}
		return &secs[i]
	}
	r.trace.mu.Lock()
	for _, a := range r.trace.log {
		switch s := at(a.received); {
		case a.status/100 == 2:
			s.ok++
		case a.status == 429:
			s.rejected++
		}
	}
	r.trace.mu.Unlock()
	r.events.mu.Lock()
	for _, e := range r.events.log {
		at(e.at).events[e.Kind.String()]++
	}
	r.events.mu.Unlock()
	var b strings.Builder
	for i, s := range secs {
		fmt.Fprintf(&b, "%3ds %4d/%-3d %s\n", i, s.ok, s.rejected, join(s.events))
	}
	return b.String()
}

// join lists m's counts in key order.
func join(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
