// Package all compiles every first-party extension and adapter into the binary that
// imports it (the keel command). Add a blank import here when a new one lands.
package all

import (
	_ "github.com/keelhq/keel/adapters/alpha_local"     // adapter.alpha_local (Claude Code CLI)
	_ "github.com/keelhq/keel/adapters/beta_local"      // adapter.beta_local (Codex CLI)
	_ "github.com/keelhq/keel/adapters/delta_local"     // adapter.delta_local (OpenCode CLI)
	_ "github.com/keelhq/keel/adapters/epsilon_local"   // adapter.epsilon_local (Pi coding agent CLI)
	_ "github.com/keelhq/keel/adapters/eta"             // adapter.eta (Cursor Agent CLI)
	_ "github.com/keelhq/keel/adapters/gamma_local"     // adapter.gamma_local (Gemini CLI)
	_ "github.com/keelhq/keel/adapters/http"            // adapter.http
	_ "github.com/keelhq/keel/adapters/process"         // adapter.process
	_ "github.com/keelhq/keel/adapters/theta_gateway"   // adapter.theta_gateway (agent gateway, WebSocket)
	_ "github.com/keelhq/keel/adapters/zeta_gateway"    // adapter.zeta_gateway (remote run server, HTTP + SSE)
	_ "github.com/keelhq/keel/adapters/zeta_local"      // adapter.zeta_local (Hermes Agent CLI)
	_ "github.com/keelhq/keel/extensions/agents"        // agents, heartbeat runs
	_ "github.com/keelhq/keel/extensions/builtinagents" // built-in agents from the builtins registry
	_ "github.com/keelhq/keel/extensions/cases"         // cases, case documents, annotations, links, timeline
	_ "github.com/keelhq/keel/extensions/costs"         // cost events, budgets, finance events
	_ "github.com/keelhq/keel/extensions/dashboard"     // the company dashboard
	_ "github.com/keelhq/keel/extensions/decisions"     // decisions, bundles, stats
	_ "github.com/keelhq/keel/extensions/environments"  // environments, leases, adapter device logins
	_ "github.com/keelhq/keel/extensions/folders"       // routine and skill folder trees
	_ "github.com/keelhq/keel/extensions/portability"   // company export and import packages
	_ "github.com/keelhq/keel/extensions/routines"      // routines, triggers, webhooks, scheduled runs
	_ "github.com/keelhq/keel/extensions/secrets"       // company secrets
	_ "github.com/keelhq/keel/extensions/skills"        // company skills, imports, the skill catalog
	_ "github.com/keelhq/keel/extensions/statuscards"   // status cards, compiles, refreshes, update ledger
	_ "github.com/keelhq/keel/extensions/work"          // issues, projects, goals, approvals, search
	_ "github.com/keelhq/keel/extensions/workspaces"    // execution workspaces, worktrees, runtime services
)
