// Command gen writes the distributed package's schedule_gen.lua and
// protocol_gen.go from the engine's protocol tables, in the current
// directory: `go generate ./distributed` runs it there.
package main

import (
	"log"
	"os"

	"github.com/throttle-go/throttle/internal/protogen"
	"github.com/throttle-go/throttle/internal/protolua"
)

func main() {
	if err := os.WriteFile("schedule_gen.lua", protolua.Lua(), 0o644); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile("protocol_gen.go", protogen.Go("distributed"), 0o644); err != nil {
		log.Fatal(err)
	}
}
