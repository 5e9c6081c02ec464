package throttle

import (
	"context"
	"io"
	"net/http"
)

// A request holds its in-flight units ([Quota].Acquire) until it is over for
// the server and the caller: its response body closed or read to the end
// (or failed), or its context ended. [Transport] gives them back on the
// first of these, through the body it returns.

// holdUntilDone makes resp's body release the in-flight units of its
// attempt when it is closed, read to EOF or fails, or when ctx ends; a
// response without a body releases them at once. release must be safe
// to call more than once and from any goroutine (the [Quota].Acquire
// contract).
func holdUntilDone(ctx context.Context, resp *http.Response, release func()) {
	if resp.Body == nil || resp.Body == http.NoBody {
		release()
		return
	}
	h := heldBody{ReadCloser: resp.Body, release: release, stop: neverEnds}
	if ctx.Done() != nil { // a context that never ends needs no watch
		h.stop = context.AfterFunc(ctx, release)
	}
	if rwc, ok := resp.Body.(io.ReadWriteCloser); ok {
		// A 101 Switching Protocols body is the connection itself:
		// net/http's Client requires it to stay writable.
		resp.Body = &heldConn{heldBody: h, w: rwc}
		return
	}
	resp.Body = &h
}

// heldBody is a response body that holds in-flight units until done.
type heldBody struct {
	io.ReadCloser
	release func()
	stop    func() bool // stops the release at ctx's end
}

// Read reads the body; at EOF, or any error, the response is over.
func (b *heldBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.done()
	}
	return n, err
}

// Close closes the body and releases its units.
func (b *heldBody) Close() error {
	err := b.ReadCloser.Close()
	b.done()
	return err
}

// neverEnds is the stop of a release at the end of a context that never
// ends.
func neverEnds() bool { return true }

func (b *heldBody) done() {
	b.stop()
	b.release()
}

// heldConn is a heldBody that is also writable (a 101 response's
// connection).
type heldConn struct {
	heldBody
	w io.Writer
}

func (c *heldConn) Write(p []byte) (int, error) { return c.w.Write(p) }
