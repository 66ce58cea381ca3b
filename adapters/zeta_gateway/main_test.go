package zetagateway_test

import (
	"testing"

	_ "github.com/keelhq/keel/adapters/zeta_gateway"
	_ "github.com/keelhq/keel/extensions/agents"
	_ "github.com/keelhq/keel/extensions/secrets"
	_ "github.com/keelhq/keel/extensions/work"
	"github.com/keelhq/keel/sdktest"
)

// TestMain runs the tests; when the host re-executes this binary as an extension,
// sdktest.Main serves it instead.
func TestMain(m *testing.M) { sdktest.Main(m) }
