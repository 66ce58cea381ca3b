package hostsvc_test

import (
	"testing"

	"github.com/keelhq/keel/sdktest"
)

// TestMain shares one embedded PostgreSQL cluster across the package's tests (and serves
// the extension role when a host re-executes this binary).
func TestMain(m *testing.M) { sdktest.Main(m) }
