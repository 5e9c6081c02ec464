package view_test

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/distributed"
	"github.com/throttle-go/throttle/internal/redistest"
	"github.com/throttle-go/throttle/view"
)

// TestViewOfAFleet: a distributed Limiter's keys show their state in
// Redis, and its store's health; when Redis is away, the view says the
// process falls back, and a row's error does not show a redacted key.
func TestViewOfAFleet(t *testing.T) {
	s := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), ContextTimeoutEnabled: true})
	defer c.Close()
	ctx := context.Background()
	lim := distributed.New(c, "fleet-view", throttle.Limit{Rate: 1, Burst: 5})
	defer lim.Close()
	const secret = "sk-live-SECRET42"
	for _, k := range []string{secret, "api.github.com"} {
		if err := lim.For(k).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	redact := func(key string) string { return strings.Replace(key, "SECRET", "…", 1) }
	plain := &view.Handler{Limiters: map[string]view.Source{"fleet": lim}}
	redacted := &view.Handler{Limiters: map[string]view.Source{"fleet": lim}, Redact: redact}

	_, _, body := get(t, redacted, "/?format=json", "")
	g := page(t, body).Limiters[0]
	if g.Store == nil || g.Store.FallingBack || g.Store.BreakerOpen || g.Store.FailMode != "FailLocal" {
		t.Errorf("store with Redis up: %+v; want FailLocal, not falling back, breaker closed", g.Store)
	}
	if len(g.Keys) != 2 {
		t.Fatalf("view shows %d keys; want 2:\n%s", len(g.Keys), body)
	}
	for _, r := range g.Keys {
		st, err := lim.For(strings.Replace(r.Key, "…", "SECRET", 1)).State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if r.Error != "" || r.Remaining == nil || *r.Remaining != st.Remaining || r.Burst != st.Burst || *r.Rate != float64(st.Rate) {
			t.Errorf("key %q: view's row %+v; want its State's remaining %v, burst %v, rate %v", r.Key, r, st.Remaining, st.Burst, st.Rate)
		}
	}

	s.Stop()
	for range 3 { // FailLocal answers; the breaker opens
		if err := lim.For("api.github.com").Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	_, _, body = get(t, redacted, "/?format=json", "")
	g = page(t, body).Limiters[0]
	if g.Store == nil || !g.Store.FallingBack || !g.Store.BreakerOpen {
		t.Errorf("store with Redis away: %+v; want falling back, breaker open", g.Store)
	}
	for _, r := range g.Keys {
		if r.Error == "" {
			t.Errorf("key %q with Redis away: no error; want one", r.Key)
		}
	}
	if strings.Contains(body, "SECRET") {
		t.Errorf("redacted view with Redis away shows the key:\n%s", body)
	}
	_, _, html := get(t, redacted, "/", "")
	if strings.Contains(html, "SECRET") || !strings.Contains(html, "state unavailable") || !strings.Contains(html, "falling back since") {
		t.Errorf("redacted HTML view with Redis away: want the rows' errors withheld and the fallback shown:\n%s", html)
	}
	_, _, body = get(t, plain, "/?format=json", "")
	if !strings.Contains(body, secret) {
		t.Errorf("view without Redact does not show the key's error as it is:\n%s", body)
	}
}
