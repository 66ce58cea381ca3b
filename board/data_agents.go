package board

import (
	"encoding/json"
	"time"
)

// The shapes below are the parts of the agents, runs, keys and adapters answers that the
// agent and run pages show (spec part 1 "agents"; the agents extension and the kernel own
// the full shapes).

// agentFull is an agent as GET /api/agents/{agentId} and the company roster answer it.
type agentFull struct {
	ID                 string          `json:"id"`
	CompanyID          string          `json:"companyId"`
	Name               string          `json:"name"`
	Role               string          `json:"role"`
	Title              *string         `json:"title"`
	Status             string          `json:"status"`
	ReportsTo          *string         `json:"reportsTo"`
	Capabilities       *string         `json:"capabilities"`
	AdapterType        string          `json:"adapterType"`
	AdapterConfig      json.RawMessage `json:"adapterConfig"`
	BudgetMonthlyCents int64           `json:"budgetMonthlyCents"`
	SpentMonthlyCents  int64           `json:"spentMonthlyCents"`
	PauseReason        *string         `json:"pauseReason"`
	ErrorReason        *string         `json:"errorReason"`
	Permissions        map[string]bool `json:"permissions"`
	LastHeartbeatAt    *time.Time      `json:"lastHeartbeatAt"`
	ConfigRedacted     bool            `json:"configRedacted"`
	ChainOfCommand     []struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"chainOfCommand"`
	Access *struct {
		CanAssignTasks   bool   `json:"canAssignTasks"`
		TaskAssignSource string `json:"taskAssignSource"`
		Reason           string `json:"reason"`
	} `json:"access"`
}

// agentKey is an entry of GET /api/agents/{agentId}/keys (never its token).
type agentKey struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	LastUsedAt *time.Time `json:"lastUsedAt"`
	RevokedAt  *time.Time `json:"revokedAt"`
	CreatedAt  time.Time  `json:"createdAt"`
}

// agentKeyCreated is POST /api/agents/{agentId}/keys: the only answer with the token.
type agentKeyCreated struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Token string `json:"token"`
}

// agentAdapter is an entry of GET /api/adapters.
type agentAdapter struct {
	Type     string `json:"type"`
	Label    string `json:"label"`
	Loaded   bool   `json:"loaded"`
	Disabled bool   `json:"disabled"`
}

// runFull is a heartbeat run as GET /api/heartbeat-runs/{runId} and the run lists answer it.
type runFull struct {
	ID               string          `json:"id"`
	CompanyID        string          `json:"companyId"`
	AgentID          string          `json:"agentId"`
	InvocationSource string          `json:"invocationSource"`
	TriggerDetail    *string         `json:"triggerDetail"`
	Status           string          `json:"status"`
	StartedAt        *time.Time      `json:"startedAt"`
	FinishedAt       *time.Time      `json:"finishedAt"`
	Error            *string         `json:"error"`
	ErrorCode        *string         `json:"errorCode"`
	AdapterType      *string         `json:"adapterType"`
	ExitCode         *int            `json:"exitCode"`
	UsageJSON        json.RawMessage `json:"usageJson"`
	LogBytes         int64           `json:"logBytes"`
	ContextSnapshot  map[string]any  `json:"contextSnapshot"`
	CreatedAt        time.Time       `json:"createdAt"`
}

// runUsage is the part of a run's usageJson the run page shows.
type runUsage struct {
	InputTokens          *float64 `json:"inputTokens"`
	CachedInputTokens    *float64 `json:"cachedInputTokens"`
	OutputTokens         *float64 `json:"outputTokens"`
	CostUsd              *float64 `json:"costUsd"`
	CacheAdjustedCostUsd *float64 `json:"cacheAdjustedCostUsd"`
	Provider             string   `json:"provider"`
	Model                string   `json:"model"`
	CostStatus           string   `json:"costStatus"`
}

// runEvent is an entry of GET /api/heartbeat-runs/{runId}/events.
type runEvent struct {
	Seq       int64     `json:"seq"`
	EventType string    `json:"eventType"`
	Stream    *string   `json:"stream"`
	Level     *string   `json:"level"`
	Message   *string   `json:"message"`
	CreatedAt time.Time `json:"createdAt"`
}

// boardMe is the part of GET /api/cli-auth/me that says what the visitor may change.
type boardMe struct {
	IsInstanceAdmin bool   `json:"isInstanceAdmin"`
	Source          string `json:"source"`
	Memberships     []struct {
		CompanyID      string `json:"companyId"`
		MembershipRole string `json:"membershipRole"`
		Status         string `json:"status"`
	} `json:"memberships"`
}
