package httpadapter_test

import (
	"testing"

	_ "github.com/keelhq/keel/adapters/http"
	"github.com/keelhq/keel/sdktest"
)

// TestMain runs the tests; when the host re-executes this binary as the http adapter,
// sdktest.Main serves the adapter instead.
func TestMain(m *testing.M) { sdktest.Main(m) }
