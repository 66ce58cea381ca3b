package workspaces_test

import (
	"testing"

	_ "github.com/keelhq/keel/adapters/alpha_local"
	_ "github.com/keelhq/keel/extensions/agents"
	_ "github.com/keelhq/keel/extensions/skills"
	_ "github.com/keelhq/keel/extensions/work"
	_ "github.com/keelhq/keel/extensions/workspaces"
	"github.com/keelhq/keel/sdktest"
)

// TestMain runs the tests; when the host re-executes this binary as an extension,
// sdktest.Main serves it instead.
func TestMain(m *testing.M) { sdktest.Main(m) }
