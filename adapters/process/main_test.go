package process_test

import (
	"os"
	"testing"

	_ "github.com/keelhq/keel/adapters/process"
	"github.com/keelhq/keel/host/pgembed/pgtest"
	"github.com/keelhq/keel/host/supervisor"
	"github.com/keelhq/keel/sdktest"
)

// TestMain runs the tests; when the host re-executes this binary as the process adapter
// (or as the fake agents sink of events_test.go), sdktest.Main serves it instead. The test
// process makes the directory the fake sink writes to; children inherit it.
func TestMain(m *testing.M) {
	if os.Getenv(supervisor.RoleEnv) == "" && os.Getenv(eventsDirEnv) == "" {
		dir, err := os.MkdirTemp("", "keel-runevents-")
		if err != nil {
			panic(err)
		}
		os.Setenv(eventsDirEnv, dir)
		pgtest.AtExit(func() { os.RemoveAll(dir) })
	}
	sdktest.Main(m)
}
