package board

import "time"

// routine is a routine as GET /api/companies/{companyId}/routines and GET
// /api/routines/{routineId} show it (the parts the pages use).
type routine struct {
	ID                string     `json:"id"`
	CompanyID         string     `json:"companyId"`
	Title             string     `json:"title"`
	Description       *string    `json:"description"`
	AssigneeAgentID   *string    `json:"assigneeAgentId"`
	ProjectID         *string    `json:"projectId"`
	Priority          string     `json:"priority"`
	Status            string     `json:"status"`
	ConcurrencyPolicy string     `json:"concurrencyPolicy"`
	CatchUpPolicy     string     `json:"catchUpPolicy"`
	LastTriggeredAt   *time.Time `json:"lastTriggeredAt"`
	UpdatedAt         time.Time  `json:"updatedAt"`

	// List only.
	Triggers []routineTrigger `json:"triggers"`
	LastRun  *routineRun      `json:"lastRun"`

	// Detail only.
	RecentRuns []routineRun `json:"recentRuns"`
}

// routineTrigger is a trigger of a routine.
type routineTrigger struct {
	ID             string     `json:"id"`
	Kind           string     `json:"kind"`
	Label          *string    `json:"label"`
	Enabled        bool       `json:"enabled"`
	CronExpression *string    `json:"cronExpression"`
	Timezone       *string    `json:"timezone"`
	NextRunAt      *time.Time `json:"nextRunAt"`
	LastFiredAt    *time.Time `json:"lastFiredAt"`
	LastResult     *string    `json:"lastResult"`
	SigningMode    *string    `json:"signingMode"`
	WebhookURL     *string    `json:"webhookUrl"`
	LastRotatedAt  *time.Time `json:"lastRotatedAt"`
}

// routineRun is a run of a routine with its linked issue.
type routineRun struct {
	ID            string     `json:"id"`
	Source        string     `json:"source"`
	Status        string     `json:"status"`
	TriggeredAt   time.Time  `json:"triggeredAt"`
	FailureReason *string    `json:"failureReason"`
	CompletedAt   *time.Time `json:"completedAt"`
	LinkedIssue   *struct {
		ID         string `json:"id"`
		Identifier string `json:"identifier"`
		Title      string `json:"title"`
		Status     string `json:"status"`
	} `json:"linkedIssue"`
	Trigger *struct {
		Kind  string  `json:"kind"`
		Label *string `json:"label"`
	} `json:"trigger"`
}

// triggerSecret is the answer of trigger creation and secret rotation: the webhook's URL
// and secret, shown once.
type triggerSecret struct {
	Trigger        routineTrigger `json:"trigger"`
	SecretMaterial *struct {
		WebhookURL    string `json:"webhookUrl"`
		WebhookSecret string `json:"webhookSecret"`
	} `json:"secretMaterial"`
}
