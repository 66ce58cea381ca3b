package eta_test

import (
	"testing"

	_ "github.com/keelhq/keel/adapters/eta"
	"github.com/keelhq/keel/sdktest"
)

// TestMain runs the tests; when the host re-executes this binary as the adapter, sdktest.Main
// serves it instead.
func TestMain(m *testing.M) { sdktest.Main(m) }
