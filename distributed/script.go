package distributed

import (
	_ "embed"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/throttle-go/throttle/internal/schedule"
)

// The schedule script's source: schedule.lua and its parts, joined in
// this order into one chunk (the parts are files for their size, one idea
// each; they share the chunk's locals, so the order is the script's).
var scheduleSrc = strings.Join([]string{
	scheduleMain, scheduleState, scheduleLimits, scheduleBudget, scheduleTurns, scheduleAdvance, scheduleOps,
}, "\n")

var (
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
// (internal/schedule) rule for rule, with its constants prepended from
// schedule.Constants, so that each exists once. Scripts are immutable
// values (source and SHA1): sharing one is safe. Run sends EVALSHA and,
// on NOSCRIPT (a new server, a failover, SCRIPT FLUSH), EVAL once, which
// loads it again.
var scheduleScript = redis.NewScript(luaConstants() + scheduleSrc)

// luaConstants returns the schedule's constants as Lua locals, sorted so
// that the script's SHA1 is stable.
func luaConstants() string {
	c := schedule.Constants()
	names := make([]string, 0, len(c))
	for k := range c {
		names = append(names, k)
	}
	slices.Sort(names)
	var b strings.Builder
	b.WriteString("-- constants from schedule.Constants\n")
	for _, k := range names {
		fmt.Fprintf(&b, "local %s = %s\n", k, strconv.FormatFloat(c[k], 'g', -1, 64))
	}
	return b.String()
}
