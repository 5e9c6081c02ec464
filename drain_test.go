package throttle

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestKeep checks what a kept response's body replays: all of a small
// body, the first drainBytes of a large one, what came of a failed or a
// stalled one; and that the original body is closed once, within
// drainTime.
func TestKeep(t *testing.T) {
	large := strings.Repeat("x", drainBytes+1)
	readErr := errors.New("connection reset")
	tests := []struct {
		name    string
		body    func() io.ReadCloser
		want    string
		wantErr error
		took    time.Duration
	}{
		{"small", func() io.ReadCloser { return io.NopCloser(strings.NewReader("{}")) }, "{}", nil, 0},
		{"empty", func() io.ReadCloser { return http.NoBody }, "", nil, 0},
		{"large", func() io.ReadCloser { return io.NopCloser(strings.NewReader(large)) }, large[:drainBytes], errBodyDiscarded, 0},
		{"read error", func() io.ReadCloser {
			return io.NopCloser(io.MultiReader(strings.NewReader("par"), errReader{readErr}))
		}, "par", readErr, 0},
		{"stalled", func() io.ReadCloser { return &stallBody{closed: make(chan struct{})} }, `{"error":`, errBodyDiscarded, drainTime},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				closed := &closeCounter{}
				orig := tt.body()
				resp := &http.Response{Body: struct {
					io.Reader
					io.Closer
				}{orig, closerFunc(func() error { closed.Close(); return orig.Close() })}}
				start := time.Now()
				resp = keep(t.Context(), resp)
				if got := time.Since(start); got != tt.took {
					t.Errorf("keep took %v; want %v", got, tt.took)
				}
				if closed.closed.Load() != 1 {
					t.Errorf("original body closed %d times; want 1", closed.closed.Load())
				}
				got, err := io.ReadAll(resp.Body)
				if string(got) != tt.want || !errors.Is(err, tt.wantErr) {
					t.Errorf("kept body = %d bytes, %v; want %d bytes, %v", len(got), err, len(tt.want), tt.wantErr)
				}
				resp.Body.Close()
			})
		})
	}
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// TestKeepContextEnds checks that a stalled body is let go when the
// request's context ends, before drainTime.
func TestKeepContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		stalled := &stallBody{closed: make(chan struct{})}
		start := time.Now()
		resp := keep(ctx, &http.Response{Body: stalled})
		if got := time.Since(start); got != 100*time.Millisecond {
			t.Errorf("keep took %v; want 100ms, when ctx ended", got)
		}
		if _, err := io.ReadAll(resp.Body); !errors.Is(err, errBodyDiscarded) {
			t.Errorf("kept body ends with %v; want errBodyDiscarded", err)
		}
	})
}
