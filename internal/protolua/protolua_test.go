package protolua

import (
	"testing"

	"github.com/throttle-go/throttle/internal/schedule"
)

// TestCoreMatchesLayout: the core's order names every field the state's
// layout places in the core, at its place.
func TestCoreMatchesLayout(t *testing.T) {
	n := 0
	for _, f := range schedule.Layout() {
		if f.Core == 0 {
			continue
		}
		n++
		if f.Core > len(schedule.Core) || schedule.Core[f.Core-1] != luaName(f.Name) {
			t.Errorf("field %s is the core's number %d; schedule.Core names it %q", f.Name, f.Core, schedule.Core[f.Core-1])
		}
	}
	if n == 0 {
		t.Fatal("no field in the core")
	}
}

// TestLayoutsDistinct: no two arguments of a layout share a name, and
// every op has one layout.
func TestLayoutsDistinct(t *testing.T) {
	ops := map[string]string{}
	for _, l := range schedule.Layouts {
		seen := map[string]bool{}
		for _, a := range l.Args {
			if a.Name != "" && seen[a.Name] {
				t.Errorf("layout %s: %s twice", l.Name, a.Name)
			}
			seen[a.Name] = true
		}
		for _, op := range l.Ops {
			if o, ok := ops[op]; ok {
				t.Errorf("op %s in layouts %s and %s", op, o, l.Name)
			}
			ops[op] = l.Name
		}
	}
}

// TestExpand: a name of a set is written as its value (an argument's
// text code quoted), a longer set's name is not read as a shorter one's,
// a name that is not a set's is left as it is, and an unknown name of a
// known set is an error.
func TestExpand(t *testing.T) {
	got, err := Expand("x = ARGV[A.OP] .. QUEUE_ARG.FIRST; k = KIND.BUCKET; fastX.Y = 1")
	want := "x = ARGV[1] .. '1'; k = 0; fastX.Y = 1"
	if err != nil || got != want {
		t.Errorf("Expand = %q, %v; want %q", got, err, want)
	}
	if _, err := Expand("ARGV[A.NO_SUCH_ARG]"); err == nil {
		t.Error("Expand of an unknown name of A: no error")
	}
}
