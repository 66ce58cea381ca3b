// Package all compiles every first-party extension and adapter into the binary that
// imports it (the keel command). Add a blank import here when a new one lands.
package all

import (
	_ "github.com/keelhq/keel/adapters/http"            // adapter.http
	_ "github.com/keelhq/keel/adapters/process"         // adapter.process
	_ "github.com/keelhq/keel/extensions/agents"        // agents, heartbeat runs
	_ "github.com/keelhq/keel/extensions/builtinagents" // built-in agents from the builtins registry
	_ "github.com/keelhq/keel/extensions/cases"         // cases, case documents, annotations, links, timeline
	_ "github.com/keelhq/keel/extensions/costs"         // cost events, budgets, finance events
	_ "github.com/keelhq/keel/extensions/dashboard"     // the company dashboard
	_ "github.com/keelhq/keel/extensions/decisions"     // decisions, bundles, stats
	_ "github.com/keelhq/keel/extensions/routines"      // routines, triggers, webhooks, scheduled runs
	_ "github.com/keelhq/keel/extensions/secrets"       // company secrets
	_ "github.com/keelhq/keel/extensions/statuscards"   // status cards, compiles, refreshes, update ledger
	_ "github.com/keelhq/keel/extensions/work"          // issues, projects, goals, approvals, search
)
