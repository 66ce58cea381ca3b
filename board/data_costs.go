package board

import "time"

// daySpend is a day of GET /api/companies/{companyId}/costs/by-day.
type daySpend struct {
	Date              string `json:"date"`
	CostCents         int64  `json:"costCents"`
	InputTokens       int64  `json:"inputTokens"`
	CachedInputTokens int64  `json:"cachedInputTokens"`
	OutputTokens      int64  `json:"outputTokens"`
	EventCount        int64  `json:"eventCount"`
}

// costSummary is GET /api/companies/{companyId}/costs/summary.
type costSummary struct {
	SpendCents         int64   `json:"spendCents"`
	BudgetCents        int64   `json:"budgetCents"`
	UtilizationPercent float64 `json:"utilizationPercent"`
}

// spendBreakdownRow is a row of the costs/by-agent, by-agent-model, by-provider and
// by-project reads (each fills the keys it groups by).
type spendBreakdownRow struct {
	AgentID           *string `json:"agentId"`
	AgentName         *string `json:"agentName"`
	ProjectID         *string `json:"projectId"`
	ProjectName       *string `json:"projectName"`
	Provider          string  `json:"provider"`
	Biller            string  `json:"biller"`
	BillingType       string  `json:"billingType"`
	Model             string  `json:"model"`
	CostCents         int64   `json:"costCents"`
	InputTokens       int64   `json:"inputTokens"`
	CachedInputTokens int64   `json:"cachedInputTokens"`
	OutputTokens      int64   `json:"outputTokens"`
}

// budgetPolicy is a policy of GET /api/companies/{companyId}/budgets/overview.
type budgetPolicy struct {
	PolicyID           string     `json:"policyId"`
	ScopeType          string     `json:"scopeType"`
	ScopeID            string     `json:"scopeId"`
	ScopeName          *string    `json:"scopeName"`
	WindowKind         string     `json:"windowKind"`
	Amount             int64      `json:"amount"`
	ObservedAmount     int64      `json:"observedAmount"`
	RemainingAmount    int64      `json:"remainingAmount"`
	UtilizationPercent float64    `json:"utilizationPercent"`
	WarnPercent        int        `json:"warnPercent"`
	HardStopEnabled    bool       `json:"hardStopEnabled"`
	IsActive           bool       `json:"isActive"`
	Status             string     `json:"status"`
	Paused             bool       `json:"paused"`
	WindowStart        *time.Time `json:"windowStart"`
	WindowEnd          *time.Time `json:"windowEnd"`
}

// budgetOverview is GET /api/companies/{companyId}/budgets/overview.
type budgetOverview struct {
	Policies             []budgetPolicy   `json:"policies"`
	ActiveIncidents      []budgetIncident `json:"activeIncidents"`
	PausedAgentCount     int              `json:"pausedAgentCount"`
	PausedProjectCount   int              `json:"pausedProjectCount"`
	PendingApprovalCount int              `json:"pendingApprovalCount"`
}

// budgetIncident is an entry of GET /api/companies/{companyId}/budget-incidents.
type budgetIncident struct {
	ID             string     `json:"id"`
	ScopeType      string     `json:"scopeType"`
	ScopeID        string     `json:"scopeId"`
	ScopeName      *string    `json:"scopeName"`
	WindowKind     string     `json:"windowKind"`
	ThresholdType  string     `json:"thresholdType"`
	AmountLimit    int64      `json:"amountLimit"`
	AmountObserved int64      `json:"amountObserved"`
	Status         string     `json:"status"`
	ScopePaused    bool       `json:"scopePaused"`
	Resolution     *string    `json:"resolution"`
	DecisionNote   *string    `json:"decisionNote"`
	ResolvedAt     *time.Time `json:"resolvedAt"`
	CreatedAt      time.Time  `json:"createdAt"`
}

// budgetAgent is an agent of GET /api/companies/{companyId}/agents with its monthly budget.
type budgetAgent struct {
	ID                 string `json:"id"`
	Name               string `json:"name"`
	Status             string `json:"status"`
	BudgetMonthlyCents int64  `json:"budgetMonthlyCents"`
	SpentMonthlyCents  int64  `json:"spentMonthlyCents"`
}
