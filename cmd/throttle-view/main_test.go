package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/distributed"
	"github.com/throttle-go/throttle/internal/redistest"
	"github.com/throttle-go/throttle/view"
	"go.uber.org/goleak"
	"golang.org/x/time/rate"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestCommandShowsAFleetsKeys: keys written by several processes'
// Limiters of one name, with several configurations (Version 0 and a
// higher one, several rates),
// paused and with units queued, are listed and read as their writers'
// State reads them; another name's keys are not.
func TestCommandShowsAFleetsKeys(t *testing.T) {
	s := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer c.Close()
	ctx := context.Background()

	type writer struct {
		lim  *distributed.Limiter
		keys []string
	}
	mk := func(name string, r rate.Limit, burst, version int, keys ...string) writer {
		l := distributed.New(c, name, throttle.Limit{Rate: r, Burst: burst})
		l.Version = version
		t.Cleanup(func() { l.Close() })
		return writer{l, keys}
	}
	writers := []writer{
		mk("api", 0.001, 5, 0, "slow-1", "slow-2 with spaces", "tenant:\x00binary"),
		mk("api", 3, 4, 0, "three"),
		mk("api", 7, 2, 0, "seven"),
		mk("api", 0.002, 9, 2, "v2"),
		mk("other", 1, 1, 0, "not-api"),
	}
	want := map[string]*distributed.Limiter{}
	var reservations []throttle.Reservation
	for _, w := range writers {
		for _, k := range w.keys {
			q := w.lim.For(k)
			if err := q.Wait(ctx); err != nil {
				t.Fatalf("%s: %v", k, err)
			}
			if w.lim != writers[4].lim {
				want[k] = w.lim
			}
		}
	}
	if err := writers[0].lim.For("slow-1").Pause(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	for range 6 { // more than the burst: units queued
		r, err := writers[0].lim.For("slow-2 with spaces").Reserve(ctx)
		if err != nil {
			t.Fatal(err)
		}
		reservations = append(reservations, r)
	}
	defer func() {
		for _, r := range reservations {
			r.Cancel()
		}
	}()

	var out, errOut bytes.Buffer
	if code := run(ctx, []string{"-addr", s.Addr(), "-json", "api"}, &out, &errOut); code != 0 {
		t.Fatalf("throttle-view -json api: exit %d, %s", code, errOut.String())
	}
	var p view.Page
	if err := json.Unmarshal(out.Bytes(), &p); err != nil {
		t.Fatalf("decoding the output: %v\n%s", err, out.String())
	}
	if len(p.Limiters) != 1 || p.Limiters[0].Name != "api" || p.Limiters[0].LeftOut != 0 {
		t.Fatalf("output: %+v; want the one quota api, nothing left out", p.Limiters)
	}
	rows := p.Limiters[0].Keys
	if len(rows) != len(want) {
		t.Errorf("output has %d keys; want %d:\n%s", len(rows), len(want), out.String())
	}
	for _, r := range rows {
		lim, ok := want[r.Key]
		if !ok {
			t.Errorf("output has key %q; want only the name's", r.Key)
			continue
		}
		st, err := lim.For(r.Key).State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if r.Error != "" || r.Rate == nil || math.Abs(*r.Rate-float64(st.Rate)) > 1e-9*float64(st.Rate) || r.Burst != st.Burst || r.Queued != st.Queued {
			t.Errorf("key %q: rate %v, burst %v, queued %v, error %q; want %v, %v, %v (its writer's State)", r.Key, r.Rate, r.Burst, r.Queued, r.Error, st.Rate, st.Burst, st.Queued)
			continue
		}
		if st.Rate < 0.01 && (r.Tokens == nil || math.Abs(*r.Tokens-st.Tokens) > 0.01) {
			t.Errorf("key %q: tokens %v; want %v", r.Key, r.Tokens, st.Tokens)
		}
		if (r.PausedUntil != nil) != (st.Paused > 0) || r.PausedUntil != nil && r.PausedUntil.Sub(st.At.Add(st.Paused)).Abs() > 50*time.Millisecond {
			t.Errorf("key %q: paused until %v; want %v from %v", r.Key, r.PausedUntil, st.Paused, st.At)
		}
	}

	out.Reset()
	if code := run(ctx, []string{"-addr", s.Addr(), "-max", "2", "api"}, &out, &errOut); code != 0 {
		t.Fatalf("throttle-view -max 2 api: exit %d, %s", code, errOut.String())
	}
	table := out.String()
	if got := strings.Count(table, "\n"); got != 4 || !strings.Contains(table, "2 keys, more not shown") || !strings.Contains(table, "KEY") {
		t.Errorf("table of -max 2: %d lines; want a title, a header, 2 keys, saying more are not shown:\n%s", got, table)
	}
	if code := run(ctx, []string{"-addr", s.Addr()}, &out, &errOut); code != 2 {
		t.Errorf("throttle-view without a name: exit %d; want 2", code)
	}
}
