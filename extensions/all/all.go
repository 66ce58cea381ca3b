// Package all compiles every first-party extension into the binary that imports it. Add a
// blank import here when a new first-party extension lands.
package all

import (
	_ "github.com/keelhq/keel/extensions/work" // issues, projects, goals, approvals, search
)
