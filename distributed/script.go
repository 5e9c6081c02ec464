package distributed

import (
	_ "embed"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/throttle-go/throttle/internal/protolua"
)

// The schedule script's source: schedule.lua and its parts, joined in
// this order into one chunk (the parts are files for their size, one idea
// each; they share the chunk's locals, so the order is the script's).
var scheduleSrc = strings.Join([]string{
	scheduleMain, scheduleState, scheduleLimits, scheduleBudget, scheduleTurns, scheduleAdvance, scheduleOps,
}, "\n")

//go:generate go run ../internal/protogen/gen

var (
	//go:embed schedule_gen.lua
	schedulePrelude string
	//go:embed schedule.lua
	scheduleMain string
	//go:embed schedule_state.lua
	scheduleState string
	//go:embed schedule_limits.lua
	scheduleLimits string
	//go:embed schedule_budget.lua
	scheduleBudget string
	//go:embed schedule_turns.lua
	scheduleTurns string
	//go:embed schedule_advance.lua
	scheduleAdvance string
	//go:embed schedule_ops.lua
	scheduleOps string
)

// scheduleScript is the key's schedule in Lua: the engine's
// (internal/schedule) rule for rule, after the prelude generated from the
// engine's protocol tables (schedule_gen.lua: its constants, argument and
// reply positions, codes, limit kinds and state slots), so that each
// exists once. Scripts are immutable values (source and SHA1): sharing
// one is safe. Run sends EVALSHA and, on NOSCRIPT (a new server, a
// failover, SCRIPT FLUSH), EVAL once, which loads it again.
var scheduleScript = redis.NewScript(mustExpand(schedulePrelude + scheduleSrc))

// mustExpand writes the protocol's names in the script's text as their
// values (protolua.Expand): literals, as fast as a hand-written number,
// where tables of them would be built by every call.
func mustExpand(src string) string {
	out, err := protolua.Expand(src)
	if err != nil {
		panic(err) // a script the tables do not match: TestScriptConstants fails first
	}
	return out
}
