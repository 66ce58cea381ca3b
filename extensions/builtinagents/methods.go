package builtinagents

import (
	"context"
	"net/http"
	"strings"

	"github.com/keelhq/keel/sdk"
)

func init() {
	addMethods(map[string]method{
		"resolve": {
			Description: "Resolve a built-in agent for a feature that needs it: input {key, require?}; the call's company. " +
				"Output {key, agentId (empty when not provisioned), state, paused, configured, warning?}: configured is false " +
				"when the agent is missing or in needs_setup (or awaits approval); warning is built_in_agent_paused when it is " +
				"paused. With require, an unconfigured built-in is 412 code built_in_agent_not_configured.",
			Call: (*BuiltInAgents).methodResolve,
		},
	})
}

// Resolved is the output of builtinagents.resolve.
type Resolved struct {
	Key        string `json:"key"`
	AgentID    string `json:"agentId"`
	State      string `json:"state"`
	Paused     bool   `json:"paused"`
	Configured bool   `json:"configured"`
	// Warning is built_in_agent_paused when the agent is paused.
	Warning string `json:"warning,omitempty"`
}

func (x *BuiltInAgents) methodResolve(ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in struct {
		Key     string `json:"key"`
		Require bool   `json:"require"`
	}
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	if !sdk.IsUUID(call.CompanyID) {
		return nil, sdk.Invalid("companyId", "the call needs a company")
	}
	d, err := definition(strings.TrimSpace(in.Key))
	if err != nil {
		return nil, err
	}
	v, err := x.status(ctx, call.CompanyID, d)
	if err != nil {
		return nil, err
	}
	out := &Resolved{Key: d.Key, State: v.State, Paused: v.Paused, Configured: v.Configured}
	if v.AgentID != nil {
		out.AgentID = *v.AgentID
	}
	if v.Paused {
		out.Warning = codePaused
	}
	if in.Require && !out.Configured {
		return nil, NotConfigured(d.Key)
	}
	return out, nil
}

// NotConfigured is the 412 a feature answers when the built-in it needs is missing or in
// needs_setup (spec part 2 "Built-in agents").
func NotConfigured(key string) error {
	return &sdk.Error{Status: http.StatusPreconditionFailed, Code: codeNotConfigured,
		Message: "Built-in agent " + key + " is not configured"}
}
