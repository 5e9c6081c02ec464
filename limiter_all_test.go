package throttle_test

import (
	"context"
	"slices"
	"testing"

	"github.com/throttle-go/throttle"
)

func TestAllYieldsTheKeysRemembered(t *testing.T) {
	ctx := context.Background()
	lim := &throttle.Limiter{Limits: []throttle.Limit{{Rate: 1, Burst: 5}}}
	for _, k := range []string{"b", "a", "c"} {
		if err := lim.For(k).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := lim.For("only-read").State(ctx); err != nil { // reading remembers nothing
		t.Fatal(err)
	}
	if err := lim.WaitN(ctx, 1); err != nil { // the Limiter's own quota: not a key
		t.Fatal(err)
	}
	var got []string
	for k, q := range lim.All() {
		got = append(got, k)
		st, err := q.State(ctx)
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
	n := 0
	for range lim.All() {
		n++
		break
	}
	if n != 1 {
		t.Errorf("All after break: %d keys yielded; want 1", n)
	}
}
