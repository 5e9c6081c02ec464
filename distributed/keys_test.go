package distributed

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/throttle-go/throttle"
)

func TestKeyOfInvertsRedisKey(t *testing.T) {
	for _, tc := range []struct{ prefix, name, key string }{
		{"", "api", "api.github.com"},
		{"p:", "n", ""},
		{"{tag}", "a.b", "}{.*?"},
		{"", "x", "\x00\xff"},
	} {
		rkey := redisKey(tc.prefix, tc.name, tc.key)
		for _, k := range append([]string{rkey}, inflightKeys(rkey)...) {
			if got, ok := keyOf(tc.prefix, tc.name, k); !ok || got != tc.key {
				t.Errorf("keyOf(%q, %q, %q) = %q, %v; want %q, true", tc.prefix, tc.name, k, got, ok, tc.key)
			}
		}
		if got, ok := keyOf(tc.prefix, tc.name+"x", rkey); ok {
			t.Errorf("keyOf of another name's key %q = %q, true; want false", rkey, got)
		}
	}
}

func TestAllYieldsTheKeysUsed(t *testing.T) {
	t.Parallel()
	_, c := startRedis(t)
	ctx := context.Background()
	q := New(c, "all", throttle.Limit{Rate: 1, Burst: 5})
	defer q.Close()
	for _, k := range []string{"b", "a", "c"} {
		if err := q.For(k).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.WaitN(ctx, 1); err != nil { // the Limiter's own quota: not a key
		t.Fatal(err)
	}
	var got []string
	for k, qt := range q.All() {
		got = append(got, k)
		st, err := qt.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Remaining != 4 {
			t.Errorf("All's quota of %q: Remaining %v; want 4 (one of 5 spent)", k, st.Remaining)
		}
	}
	slices.Sort(got)
	if want := []string{"a", "b", "c"}; !slices.Equal(got, want) {
		t.Errorf("All yielded %q; want %q", got, want)
	}
}

func TestStoredKeysListsTheFleetsKeys(t *testing.T) {
	t.Parallel()
	_, c := startRedis(t)
	ctx := context.Background()
	a := New(c, "fleet", throttle.Limit{Rate: 1, Burst: 5})
	b := New(c, "fleet", throttle.Limit{Rate: 1, Burst: 5})
	other := New(c, "fleet2", throttle.Limit{Rate: 1, Burst: 5})
	var want []string
	for i := range 30 {
		k := fmt.Sprintf("key-%02d", i)
		want = append(want, k)
		q := a
		if i%2 == 1 {
			q = b
		}
		if err := q.For(k).Wait(ctx); err != nil {
			t.Fatal(err)
		}
		if err := other.For(k + "-other").Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	reader := New(c, "fleet") // no limits: it only lists
	got, err := reader.StoredKeys(ctx, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("StoredKeys = %q; want %q", got, want)
	}
	got, err = reader.StoredKeys(ctx, 7)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 7 {
		t.Errorf("StoredKeys(7) gave %d keys; want 7", len(got))
	}
	if got, _ := reader.StoredKeys(ctx, 0); got != nil {
		t.Errorf("StoredKeys(0) = %q; want none", got)
	}
}

func TestHealthReportsAnOutage(t *testing.T) {
	t.Parallel()
	s, c := startRedis(t)
	ctx := context.Background()
	q := New(c, "health", throttle.Limit{Rate: 1000, Burst: 10})
	defer q.Close()
	if err := q.For("k").Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if h := q.Health(); h.FallingBack || h.BreakerOpen || h.Failures != 0 || h.Err != nil {
		t.Errorf("Health with Redis up = %+v; want nothing wrong", h)
	}
	s.Stop()
	for range breakerThreshold {
		if err := q.For("k").Wait(ctx); err != nil { // FailLocal: answered locally
			t.Fatal(err)
		}
	}
	h := q.Health()
	if !h.FallingBack || !h.BreakerOpen || h.Failures != breakerThreshold || h.FailMode != FailLocal {
		t.Errorf("Health after %d failed calls = %+v; want FallingBack, BreakerOpen, Failures %d, FailLocal", breakerThreshold, h, breakerThreshold)
	}
}
