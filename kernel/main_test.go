package kernel_test

import (
	"testing"

	"github.com/keelhq/keel/host/pgembed/pgtest"
)

// TestMain shares one embedded PostgreSQL cluster across the package's tests; each test
// gets its own database from pgtest.NewDatabase.
func TestMain(m *testing.M) { pgtest.Main(m) }
