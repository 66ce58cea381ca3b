package agents

import (
	"fmt"
	"unicode/utf8"
)

// Text field limits of an agent's configuration, in characters. The name's is the
// reference product's; the others are keel's, generous for what the fields hold.
const (
	agentNameMax         = 200
	agentTitleMax        = 200
	agentIconMax         = 200
	agentCapabilitiesMax = 20000
)

// limitText adds a validation error when s is longer than max characters.
func limitText(errs *fieldErrs, path string, s *string, max int) {
	if s != nil && utf8.RuneCountInString(*s) > max {
		errs.add(path, fmt.Sprintf("must be at most %d characters", max))
	}
}
