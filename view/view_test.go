package view_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/view"
)

// get serves h a GET of target with the header accept (if not empty) and
// returns the response's status, content type and body.
func get(t *testing.T, h http.Handler, target, accept string) (int, string, string) {
	t.Helper()
	req := httptest.NewRequest("GET", target, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Header().Get("Content-Type"), rec.Body.String()
}

// page decodes a JSON view.
func page(t *testing.T, body string) view.Page {
	t.Helper()
	var p view.Page
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatalf("decoding the view's JSON: %v\n%s", err, body)
	}
	return p
}

// rowOf returns the view's row of st, through JSON as a client reads it.
func rowOf(t *testing.T, key string, st throttle.State) view.Row {
	t.Helper()
	h := &view.Handler{Limiters: map[string]view.Source{"x": fixed{key, st}}}
	_, _, body := get(t, h, "/?format=json", "")
	return page(t, body).Limiters[0].Keys[0]
}

// fixed is a Source of one key whose state is st.
type fixed struct {
	key string
	st  throttle.State
}

func (f fixed) All() iter.Seq2[string, throttle.Quota] {
	return func(yield func(string, throttle.Quota) bool) { yield(f.key, fixedQuota{Quota: nil, st: f.st}) }
}

type fixedQuota struct {
	throttle.Quota
	st throttle.State
}

func (q fixedQuota) State(context.Context) (throttle.State, error) { return q.st, nil }

// TestViewMatchesStateUnderLoad: while waits spend and queue on other
// goroutines, every key's row in the view lies between its State read
// just before the request and just after (the keys' rate is 0, so that
// what is left only falls and the queues only grow), and once the load
// is over the view is the keys' State exactly.
func TestViewMatchesStateUnderLoad(t *testing.T) {
	const burst = 40
	lim := &throttle.Limiter{Limits: []throttle.Limit{{Rate: 0, Burst: burst}}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	keys := []string{"a", "b", "c", "d"}
	if err := lim.For("paused").Pause(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	keys = append(keys, "paused")
	srv := httptest.NewServer(&view.Handler{Limiters: map[string]view.Source{"lim": lim}})
	defer srv.Close()

	var wg sync.WaitGroup
	for _, k := range keys {
		for range 3 {
			wg.Go(func() {
				for lim.For(k).Wait(ctx) == nil { // spends the burst, then queues until cancel
				}
			})
		}
	}
	states := func() map[string]throttle.State {
		m := make(map[string]throttle.State)
		for _, k := range keys {
			st, err := lim.For(k).State(ctx)
			if err != nil {
				t.Fatal(err)
			}
			m[k] = st
		}
		return m
	}
	fetch := func() view.Page {
		resp, err := srv.Client().Get(srv.URL + "?format=json")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return page(t, string(b))
	}
	within := func(name, key string, got, lo, hi float64) {
		if got < lo || got > hi {
			t.Errorf("key %q: view's %s %v; want within [%v, %v] (the States before and after the request)", key, name, got, lo, hi)
		}
	}
	queuedSeen := false
	for range 40 {
		before := states()
		p := fetch()
		after := states()
		g := p.Limiters[0]
		if len(g.Keys) != len(keys) || g.LeftOut != 0 {
			t.Fatalf("view shows %d keys, %d left out; want %d, 0", len(g.Keys), g.LeftOut, len(keys))
		}
		for _, r := range g.Keys {
			b, a := before[r.Key], after[r.Key]
			if r.Tokens == nil || r.Remaining == nil || r.Rate == nil {
				t.Fatalf("key %q: view's row %+v has no tokens, remaining or rate; want finite ones", r.Key, r)
			}
			within("tokens", r.Key, *r.Tokens, a.Tokens, b.Tokens)
			within("remaining", r.Key, *r.Remaining, a.Remaining, b.Remaining)
			within("queued", r.Key, float64(r.Queued), float64(b.Queued), float64(a.Queued))
			queuedSeen = queuedSeen || r.Queued > 0
			if r.Key == "paused" { // the turn is the pause's end: Next falls as time passes
				want := b.At.Add(b.Next)
				if got := r.At.Add(time.Duration(r.NextNS)); got.Sub(want).Abs() > time.Millisecond {
					t.Errorf("key %q: view's next turn at %v; want %v", r.Key, got, want)
				}
			} else {
				within("next", r.Key, float64(r.NextNS), float64(b.Next), float64(a.Next))
			}
			if *r.Rate != float64(b.Rate) || r.Burst != b.Burst {
				t.Errorf("key %q: view's rate %v, burst %v; want %v, %v", r.Key, *r.Rate, r.Burst, b.Rate, b.Burst)
			}
			if r.Key == "paused" {
				want := b.At.Add(b.Paused)
				if r.PausedUntil == nil || r.PausedUntil.Sub(want).Abs() > time.Millisecond {
					t.Errorf("key %q: view's pause until %v; want %v", r.Key, r.PausedUntil, want)
				}
			} else if r.PausedUntil != nil {
				t.Errorf("key %q: view's pause until %v; want none", r.Key, r.PausedUntil)
			}
		}
	}
	if !queuedSeen {
		t.Error("the view never showed a wait queued; want the load to queue waits while it is read")
	}
	cancel()
	wg.Wait()
	now := states()
	for _, r := range fetch().Limiters[0].Keys {
		want := rowOf(t, r.Key, now[r.Key])
		// Time passes between the two reads: the durations count from
		// their At, and end at the same instants.
		if r.At.Add(time.Duration(r.NextNS)).Sub(want.At.Add(time.Duration(want.NextNS))).Abs() < time.Millisecond {
			r.NextNS = want.NextNS
		}
		r.At, r.PausedNS = want.At, want.PausedNS
		if r.PausedUntil != nil && want.PausedUntil != nil && r.PausedUntil.Sub(*want.PausedUntil).Abs() < time.Millisecond {
			r.PausedUntil = want.PausedUntil
		}
		if !reflect.DeepEqual(r, want) {
			t.Errorf("key %q after the load: view's row\n%+v\nwant (its State's)\n%+v", r.Key, r, want)
		}
		if r.Queued != 0 {
			t.Errorf("key %q after the load: %d queued; want 0 (every wait cancelled)", r.Key, r.Queued)
		}
	}
}

// counted is a Source of n keys that does not count them (no Len).
type counted struct{ lim *throttle.Limiter }

func (c counted) All() iter.Seq2[string, throttle.Quota] { return c.lim.All() }

func TestViewCapsTheKeysShown(t *testing.T) {
	ctx := context.Background()
	lim := &throttle.Limiter{Limits: []throttle.Limit{{Rate: 1, Burst: 5}}}
	for i := range 1005 {
		if err := lim.For(fmt.Sprintf("k%04d", i)).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name       string
		max        int
		src        view.Source
		shown, out int
	}{
		{"counting Limiter, MaxKeys 10", 10, lim, 10, 995},
		{"walked Source, MaxKeys 10", 10, counted{lim}, 10, 995},
		{"default MaxKeys", 0, lim, view.DefaultMaxKeys, 5},
		{"MaxKeys above the keys", 2000, lim, 1005, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &view.Handler{Limiters: map[string]view.Source{"lim": tc.src}, MaxKeys: tc.max}
			_, _, body := get(t, h, "/?format=json", "")
			g := page(t, body).Limiters[0]
			if len(g.Keys) != tc.shown || g.LeftOut != tc.out {
				t.Errorf("view shows %d keys, %d left out; want %d, %d", len(g.Keys), g.LeftOut, tc.shown, tc.out)
			}
			_, _, html := get(t, h, "/", "")
			if tc.out > 0 && !strings.Contains(html, fmt.Sprintf("%d left out", tc.out)) {
				t.Errorf("HTML view does not say %d left out", tc.out)
			}
		})
	}
}

func TestViewRedactsKeys(t *testing.T) {
	ctx := context.Background()
	lim := &throttle.Limiter{Limits: []throttle.Limit{{Rate: 1, Burst: 5}}}
	secrets := []string{"sk-live-AAAA1111", "sk-live-BBBB2222"}
	for _, k := range secrets {
		if err := lim.For(k).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	h := &view.Handler{
		Limiters: map[string]view.Source{"lim": lim},
		Redact:   func(key string) string { return key[:len("sk-live-")] + "…" + key[len(key)-2:] },
	}
	for _, target := range []string{"/", "/?format=json"} {
		_, _, body := get(t, h, target, "")
		for _, s := range secrets {
			if strings.Contains(body, s) || strings.Contains(body, s[8:12]) {
				t.Errorf("GET %s shows the key %q:\n%s", target, s, body)
			}
			if !strings.Contains(body, "sk-live-…"+s[len(s)-2:]) {
				t.Errorf("GET %s does not show the redacted key %q:\n%s", target, "sk-live-…"+s[len(s)-2:], body)
			}
		}
	}
}

func TestViewServesHTMLOrJSON(t *testing.T) {
	ctx := context.Background()
	lim := &throttle.Limiter{Limits: []throttle.Limit{{Rate: 1, Burst: 5}}}
	if err := lim.For("<b>x</b>").Wait(ctx); err != nil {
		t.Fatal(err)
	}
	h := &view.Handler{Limiters: map[string]view.Source{"lim": lim}}
	for _, tc := range []struct {
		name, target, accept, want string
	}{
		{"browser", "/", "text/html,application/xhtml+xml,*/*;q=0.8", "text/html; charset=utf-8"},
		{"no Accept", "/", "", "text/html; charset=utf-8"},
		{"format=json", "/?format=json", "", "application/json"},
		{"Accept JSON", "/", "text/plain, application/json;q=0.9", "application/json"},
		{"format=html over Accept", "/?format=html", "application/json", "text/html; charset=utf-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, ct, body := get(t, h, tc.target, tc.accept)
			if code != http.StatusOK || ct != tc.want {
				t.Fatalf("GET %s (Accept %q): %d %q; want 200 %q", tc.target, tc.accept, code, ct, tc.want)
			}
			if strings.HasPrefix(ct, "text/html") && (strings.Contains(body, "<b>x</b>") || !strings.Contains(body, "&lt;b&gt;x&lt;/b&gt;")) {
				t.Errorf("HTML view does not escape the key <b>x</b>:\n%s", body)
			}
		})
	}
	req := httptest.NewRequest("POST", "/", nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d; want 405", rec.Code)
	}
}
