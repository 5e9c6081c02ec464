package throttle

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"time"
)

const (
	// drainBytes is the most of an abandoned response's body read before
	// a retry, so that its connection can be reused: error bodies are
	// small, and reading a large one costs more than a new connection.
	drainBytes = 4 << 10
	// drainTime is the longest the read may take: a body that stalls
	// must not hold RoundTrip.
	drainTime = 500 * time.Millisecond
)

// errBodyDiscarded is what the body of a kept response returns after its
// first drainBytes, when the rest was discarded (or never came) before a
// retry that was then given up.
var errBodyDiscarded = errors.New("throttle: rest of the response body discarded before a retry")

// keep reads what is left of the body of a response about to be retried,
// at most drainBytes and for at most drainTime (or until ctx ends), and
// closes it, so that its connection is released for reuse while the
// retry waits. It returns resp with a body that replays what was read:
// if the retry is given up before it is sent, resp is returned as it was
// received, unless its body was longer than drainBytes or stalled, when
// the body ends with errBodyDiscarded after what was read.
//
// The read runs in a goroutine so that a stalled body cannot block; when
// it stalls, closing the body ends the read (net/http's bodies unblock on
// Close) and the goroutine with it.
func keep(ctx context.Context, resp *http.Response) *http.Response {
	body := resp.Body
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		b, err := io.ReadAll(io.LimitReader(body, drainBytes+1))
		done <- result{b, err}
	}()
	timer := time.NewTimer(drainTime)
	defer timer.Stop()
	var kept io.Reader
	select {
	case r := <-done:
		switch {
		case r.err != nil:
			kept = io.MultiReader(bytes.NewReader(r.b), errReader{r.err})
		case len(r.b) > drainBytes:
			kept = io.MultiReader(bytes.NewReader(r.b[:drainBytes]), errReader{errBodyDiscarded})
		default:
			kept = bytes.NewReader(r.b)
		}
	case <-timer.C:
		kept = errReader{errBodyDiscarded}
	case <-ctx.Done():
		kept = errReader{errBodyDiscarded}
	}
	body.Close()
	resp.Body = io.NopCloser(kept)
	return resp
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// closeResponse closes resp's body, if any.
func closeResponse(resp *http.Response) {
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
}
