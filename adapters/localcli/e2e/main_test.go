// Package e2e_test runs every local CLI adapter end to end: a real host with the agents and
// work extensions, an agent of each type assigned an issue, its fake CLI's run reporting
// usage and a session that the next run of the issue resumes.
package e2e_test

import (
	"testing"

	_ "github.com/keelhq/keel/adapters/alpha_local"
	_ "github.com/keelhq/keel/adapters/beta_local"
	_ "github.com/keelhq/keel/adapters/delta_local"
	_ "github.com/keelhq/keel/adapters/epsilon_local"
	_ "github.com/keelhq/keel/adapters/eta"
	_ "github.com/keelhq/keel/adapters/gamma_local"
	_ "github.com/keelhq/keel/adapters/zeta_local"
	_ "github.com/keelhq/keel/extensions/agents"
	_ "github.com/keelhq/keel/extensions/work"
	_ "github.com/keelhq/keel/extensions/workspaces"
	"github.com/keelhq/keel/sdktest"
)

// TestMain runs the tests; when the host re-executes this binary as an extension,
// sdktest.Main serves it instead.
func TestMain(m *testing.M) { sdktest.Main(m) }
