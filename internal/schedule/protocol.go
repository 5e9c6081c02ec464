package schedule

// The protocol: what the engine and a store's script must agree on,
// stated once. Package protogen writes, from these tables, the script's
// prelude (every constant, argument and reply position, limit kind and
// state slot as a named Lua local) and the Go side's names; a test fails
// when the written files are stale. Nothing else states a position.

// Arg is one argument of an op: its name (upper case, as the script names
// it) and what it holds. List: it is the first of the rest of ARGV.
type Arg struct {
	Name string
	Doc  string
	List bool
}

// ArgLayout is the arguments of a group of ops, after the four every call
// sends (Header): Args[i] is ARGV[len(Header)+1+i]; an empty name is a
// position the layout leaves unused.
type ArgLayout struct {
	Name string   // the script's prefix for its arguments: WAIT_N
	Ops  []string // the ops that use it
	Args []Arg
}

// Header is the arguments every call sends first, ARGV[1] to ARGV[4].
var Header = []Arg{
	{Name: "OP", Doc: "the op's name"},
	{Name: "INTERVAL", Doc: "the configured µs per unit (0: no limit)"},
	{Name: "BURST", Doc: `the burst, with ":version" after it when the configuration has a version`},
	{Name: "CHANNEL", Doc: "the channel a move is published on"},
}

// known are the arguments a wait or lease sends of what its process knew
// of a state the store lost.
var known = []Arg{
	{Name: "KNOWN_ID", Doc: `the id of the state the process knew ("": none)`},
	{Name: "KNOWN_FLOOR", Doc: `its last turn, µs from now ("": none)`},
	{Name: "KNOWN_HOLD", Doc: `its known pause, µs from now ("": none)`},
}

// limits are the arguments of an op on further limits, at fixed places.
var limits = []Arg{
	{Name: "XSPEC", Doc: `the further limits' configuration, "version|spec"`},
	{Name: "XCOST", Doc: "the cost (or, settling, actual − spent) in each further limit", List: true},
}

func pad(n int) []Arg { return make([]Arg, n) }

func cat(parts ...[]Arg) []Arg {
	var out []Arg
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// Layouts are the ops' arguments.
var Layouts = []ArgLayout{
	{Name: "WAIT", Ops: []string{"wait", "try", "mwait", "mtry"}, Args: cat([]Arg{
		{Name: "N", Doc: "units of the first limit"},
		{Name: "QUEUE", Doc: "0: retries, 1: first attempts (the default class), 2: critical, 3: background"},
		{Name: "MAXWAIT", Doc: `the most µs the turn may be from now ("": no bound; "0": a try)`},
	}, known, []Arg{
		{Name: "MAXQUEUED", Doc: `the most units the key's queues may hold with the wait's, if it queues ("" or absent: no bound)`},
	}, limits)},
	{Name: "TURNS", Ops: []string{"turns"}, Args: []Arg{
		{Name: "ID", Doc: "the tickets' state's id"},
		{Name: "TICKETS", Doc: "pairs of queue and end", List: true},
	}},
	{Name: "CANCEL", Ops: []string{"cancel"}, Args: []Arg{
		{Name: "ID", Doc: "the ticket's state's id"},
		{Name: "QUEUE", Doc: "its queue"},
		{Name: "END", Doc: "its end"},
		{Name: "N", Doc: "its units"},
	}},
	{Name: "PAUSE", Ops: []string{"pause"}, Args: []Arg{
		{Name: "D", Doc: "µs from now"},
	}},
	{Name: "ADAPT", Ops: []string{"adapt"}, Args: []Arg{
		{Name: "COST", Doc: "the request's cost"},
		{Name: "PAUSE", Doc: "a pause, µs from now (0: none)"},
		{Name: "REMAINING", Doc: `the server's window: units left ("": no window)`},
		{Name: "RESET", Doc: "its reset, µs from now"},
		{Name: "SIZE", Doc: "its size (0: unknown)"},
		{Name: "LENGTH", Doc: "its length, µs (0: unknown)"},
		{Name: "REJECTED_AGE", Doc: `a bare rejection: the request's age, µs ("": none)`},
		{Name: "REFUSED", Doc: `"1": a refusal that said when to come back`},
		{Name: "AGE", Doc: `the request's age, µs ("": unknown)`},
		{Name: "ACCEPTED", Doc: `"1": a unit sent past a learned window's reset was taken; "2": a refusal that stated a limit`},
	}},
	{Name: "SETTLE", Ops: []string{"settle", "msettle"}, Args: cat([]Arg{
		{Name: "SPENT", Doc: "units of the first limit spent"},
		{Name: "ACTUAL", Doc: "what they really cost"},
	}, pad(5), limits)},
	{Name: "LEASE", Ops: []string{"lease"}, Args: cat([]Arg{
		{Name: "K", Doc: "tickets to take, at most"},
		{Name: "NEED", Doc: "of them for waits queued in the process"},
		{Name: "MAXWAIT", Doc: `the most µs a needed turn may be from now ("": no bound)`},
		{Name: "RATE", Doc: "the waits expected, units a second"},
		{Name: "LATE", Doc: "how early before its expected arrival an unneeded turn may be, µs"},
	}, known, []Arg{
		{Name: "BACK_ID", Doc: `the id of the tickets given back ("": none)`},
		{Name: "BACK", Doc: "their ends", List: true},
	})},
	{Name: "STATE", Ops: []string{"state", "mstate"}, Args: cat(pad(7), limits[:1])},
}

// ReplyLayout is an op's reply: if Lead is set, a list of numbers first,
// one for each item the call sent (turns: a wait per ticket), and Fields'
// positions count from its end; then its numbers in order (Fields); then,
// if List is set, a list of numbers (its length is the reply's to say);
// then, if Last is set, one number sent only when the state has it.
type ReplyLayout struct {
	Name   string
	Ops    []string
	Lead   string
	Fields []string
	List   string
	Last   string
}

// Replies are the ops' replies (µs are from the reply's now; a recheck of
// Reply.None is none; RESET is a learned window's reset, µs from now).
var Replies = []ReplyLayout{
	{Name: "RWAIT", Ops: []string{"wait", "try", "mwait", "mtry"},
		Fields: []string{"STATUS", "WAIT", "ID", "END", "RECHECK", "NOW"}, Last: "RESET"},
	{Name: "RTURNS", Ops: []string{"turns"},
		Lead: "WAITS", Fields: []string{"RECHECK", "NOW"}, Last: "RESET"},
	{Name: "RCANCEL", Ops: []string{"cancel"}, Fields: []string{"BACK"}},
	{Name: "RPAUSE", Ops: []string{"pause"}, Fields: []string{"UNTIL"}},
	{Name: "RADAPT", Ops: []string{"adapt"}, Fields: []string{"PAUSE"}},
	{Name: "RSETTLE", Ops: []string{"settle", "msettle"}, Fields: []string{"DROPPED"}, List: "XDROPPED"},
	{Name: "RLEASE", Ops: []string{"lease"},
		Fields: []string{"COUNT", "ID", "LAST", "RECHECK", "NOW"}, List: "WAITS", Last: "RESET"},
	{Name: "RSTATE", Ops: []string{"state"},
		Fields: []string{"TOKENS", "REMAINING", "NEXT", "HOLD", "QUEUED", "RATE", "BURST", "CUT", "WINDOW", "WINDOW_LEFT", "WINDOW_RESET", "CRITICAL", "BACKGROUND", "NOW"}},
	{Name: "RMSTATE", Ops: []string{"mstate"}, Fields: []string{"NOW"}, List: "REMAINING"},
}

// Code is a named value both sides use: a code an argument or a reply
// carries, a tag, or a number of the protocol.
type Code struct {
	Name  string
	Value float64
	Doc   string
}

// CodeSet is a group of codes. Arg: its values travel as arguments, which
// the script compares as text (the prelude has them as text too, in the
// set's name with _ARG after it).
type CodeSet struct {
	Name  string
	Doc   string
	Arg   bool
	Codes []Code
}

// Codes are the protocol's named values.
var Codes = []CodeSet{
	{Name: "CORE", Doc: "the core's tag: what follows its doubles and tail", Codes: []Code{
		{"BARE", 2, "nothing: the state has no x"},
		{"X", 3, "x is in the hash's field x (MessagePack)"},
		{"XC", 4, "x's short form: the further limits alone, after the tail"},
	}},
	{Name: "QUEUE", Doc: "the queues", Arg: true, Codes: []Code{
		{"RETRY", Retry, "retries"},
		{"FIRST", First, "first attempts (the default class)"},
		{"CRITICAL", Critical, "first attempts of the critical class (classes.go)"},
		{"BACKGROUND", Background, "first attempts of the background class"},
	}},
	{Name: "FLAG", Doc: `a flag argument: "" is off`, Arg: true, Codes: []Code{
		{"ON", 1, "on"},
	}},
	{Name: "ACCEPTED", Doc: `adapt's ACCEPTED ("": none)`, Arg: true, Codes: []Code{
		{"UNIT", AcceptedUnit, "the server took a unit sent past a learned window's reset"},
		{"STATED", AcceptedStated, "a refusal that stated a limit of the server's own (no hidden budget)"},
	}},
	{Name: "STATUS", Doc: "a wait's or try's status", Codes: []Code{
		{"NONE", 0, "its turn is past the max wait (a try's: not now): nothing kept"},
		{"OK", 1, "a ticket, whose turn is WAIT from now (a try's: its units went)"},
		{"FULL", 2, "it would queue, and its units would take the queued units past MAXQUEUED: nothing kept"},
	}},
	{Name: "BACK", Doc: "cancel's reply", Codes: []Code{
		{"NO", 0, "the units were not given back: their turn had come, or the state is another"},
		{"YES", 1, "the units came back"},
	}},
	{Name: "TURN", Doc: "a ticket's wait in turns' reply, when it has none", Codes: []Code{
		{"GONE", -1, "its turn has come: it went"},
		{"LOST", -2, "the state it came from is lost"},
	}},
	{Name: "REPLY", Doc: "numbers of replies", Codes: []Code{
		{"NONE", -1, "a recheck or reset that is none"},
		{"INF", 1 << 53, "+Inf, of a state's numbers"},
		{"FAR", 1 << 62, "the most µs (and scaled number) a reply carries: past the largest time.Duration; Redis replies a Lua number as C's cast to an integer, undefined past 2^63"},
	}},
	{Name: "TIME", Doc: "times of the state", Codes: []Code{
		{"NONE", NoneTime, "a time not set"},
	}},
}

// Kind is a further limit's kind: its code in the state and its letter
// in a configuration's spec.
type Kind struct {
	Name   string
	Code   int
	Letter string
}

// Kinds are the further limits' kinds, in the order of their codes (0,
// 1, …).
var Kinds = []Kind{
	{"BUCKET", KindBucket, "b"},
	{"FIXED", KindFixed, "f"},
	{"SLIDING", KindSliding, "s"},
	{"LOG", KindLog, "l"},
	{"FIRST", KindFirst, "u"},
}

// Core is the order of the core's numbers after its tag (the script's
// struct-packed doubles), 1-based as the script unpacks them: the state's
// id, Layout's fields of a core place, the TTL's end and the
// configuration in force.
var Core = []string{
	"ID", "TAT", "HOLD", "Q0_REL", "Q0_END", "Q1_REL", "Q1_END", "PENDING", "LAST_GO",
	"SENT_SEC", "SENT_CUR", "SENT_PREV", "MAX_COST", "XE", "BUSY_SINCE", "CFG_INTERVAL", "CFG_TAU", "TAIL",
}
