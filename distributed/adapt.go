package distributed

import (
	"strconv"

	"github.com/throttle-go/throttle/internal/schedule"
)

// adaptArgsOf returns the arguments of op adapt that apply op, its times
// written by us (µs). The script has no declared pace and no server's
// bucket: op's Declared and Available are not sent.
func adaptArgsOf(op schedule.Adapt, us func(float64) string) adaptArgs {
	a := adaptArgs{
		Cost: num(op.Cost), Pause: us(op.Pause),
		Remaining: "", Reset: "0", Size: "0", Length: "0", // no window
		RejectedAge: "", Refused: "", Age: us(op.Age), Accepted: "",
	}
	if op.Window {
		a.Remaining, a.Reset, a.Size, a.Length = num(op.Left), us(op.Reset), num(op.Size), us(op.Length)
	}
	if op.Rejected {
		a.RejectedAge = us(op.RejectAge)
	}
	if op.Refused {
		a.Refused = flagOn
	}
	if op.Accepted != schedule.AcceptedNone {
		a.Accepted = op.Accepted
	}
	return a
}

// num writes v as the script reads it back exactly.
func num(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
