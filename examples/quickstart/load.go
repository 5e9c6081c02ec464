package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// tally counts the final outcome of each request, as the client saw it.
type tally struct {
	done    atomic.Int64 // requests finished, whatever the outcome
	ok      atomic.Int64 // 2xx
	limited atomic.Int64 // 429 (after any retries)
	other   atomic.Int64 // any other status
	failed  atomic.Int64 // no response: a transport or wait error
	retries atomic.Int64 // retries the Transport made (EventRetry)
}

// load sends n GET requests to url from c goroutines, each request once
// (any retrying is the client's business), and counts the outcomes in t.
// It returns when every request has finished or ctx ends.
func load(ctx context.Context, client *http.Client, url string, n, c int, t *tally) {
	var next atomic.Int64 // the index of the next request to send
	var wg sync.WaitGroup
	for range c {
		wg.Go(func() {
			for next.Add(1) <= int64(n) && ctx.Err() == nil {
				send(ctx, client, url, t)
			}
		})
	}
	wg.Wait()
}

func send(ctx context.Context, client *http.Client, url string, t *tally) {
	defer t.done.Add(1)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.failed.Add(1)
		return
	}
	resp, err := client.Do(req)
	if err != nil {
		t.failed.Add(1)
		return
	}
	// Read the body to the end so the connection is reused.
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		t.ok.Add(1)
	case resp.StatusCode == http.StatusTooManyRequests:
		t.limited.Add(1)
	default:
		t.other.Add(1)
	}
}

// progress shows a phase's counts while it runs: one line rewritten in place
// every 200 ms on a terminal, a plain line every 2 s otherwise (a log file
// or a pipe), and a last line when the phase ends.
type progress struct {
	name  string
	n     int
	t     *tally
	start time.Time
	tty   bool

	stop chan struct{}
	wg   sync.WaitGroup
}

func startProgress(name string, n int, t *tally) *progress {
	p := &progress{name: name, n: n, t: t, start: time.Now(), tty: isTerminal(os.Stdout), stop: make(chan struct{})}
	every := 2 * time.Second
	if p.tty {
		every = 200 * time.Millisecond
	}
	p.wg.Go(func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				p.print(false)
			case <-p.stop:
				return
			}
		}
	})
	return p
}

// end stops the updates and prints the final line.
func (p *progress) end() {
	close(p.stop)
	p.wg.Wait()
	p.print(true)
}

func (p *progress) print(final bool) {
	line := fmt.Sprintf("  %-20s %5d/%d  2xx %-5d 429 %-5d retries %-4d %6.1fs",
		p.name, p.t.done.Load(), p.n, p.t.ok.Load(), p.t.limited.Load(), p.t.retries.Load(),
		time.Since(p.start).Seconds())
	switch {
	case !p.tty:
		fmt.Println(line)
	case final:
		fmt.Printf("\r%s\n", line)
	default:
		fmt.Printf("\r%s", line)
	}
}

// isTerminal reports whether f is a terminal (a character device), without
// a dependency on x/term.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0 && !strings.EqualFold(os.Getenv("TERM"), "dumb")
}
