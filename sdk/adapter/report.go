package adapter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
)

// ReportFileEnv names the file a process adapter's command may write its run report to
// (JSON, see Report); the adapter reads it when the process exits.
const ReportFileEnv = "SERVICE_RUN_REPORT_FILE"

// MaxReportBytes bounds a run report.
const MaxReportBytes = 64 << 10

// Report is what an agent program tells its adapter about a run it just did: the model
// usage and cost the engine turns into usageJson and a cost event, the session to resume,
// and a summary. Every field is optional.
type Report struct {
	Usage                *Usage   `json:"usage,omitempty"`
	Provider             string   `json:"provider,omitempty"`
	Biller               string   `json:"biller,omitempty"`
	Model                string   `json:"model,omitempty"`
	BillingType          string   `json:"billingType,omitempty"`
	CostUSD              *float64 `json:"costUsd,omitempty"`
	CacheAdjustedCostUSD *float64 `json:"cacheAdjustedCostUsd,omitempty"`
	SessionID            string   `json:"sessionId,omitempty"`
	Summary              string   `json:"summary,omitempty"`
}

// ParseReport decodes a run report. Unknown fields are ignored (an HTTP agent's answer may
// carry other data); token counts must be non-negative and costs finite numbers.
func ParseReport(data []byte) (*Report, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil, fmt.Errorf("empty run report")
	}
	if len(data) > MaxReportBytes {
		return nil, fmt.Errorf("run report is larger than %d bytes", MaxReportBytes)
	}
	var r Report
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("run report is not a JSON object of the report fields: %w", err)
	}
	if u := r.Usage; u != nil && (u.InputTokens < 0 || u.OutputTokens < 0 || u.CachedInputTokens < 0) {
		return nil, fmt.Errorf("run report token counts must not be negative")
	}
	for name, v := range map[string]*float64{"costUsd": r.CostUSD, "cacheAdjustedCostUsd": r.CacheAdjustedCostUSD} {
		if v != nil && (math.IsNaN(*v) || math.IsInf(*v, 0)) {
			return nil, fmt.Errorf("run report %s must be a finite number", name)
		}
	}
	return &r, nil
}

// Apply copies the report's fields into an execute result, leaving fields the report does
// not set alone.
func (r *Report) Apply(res *ExecuteResult) {
	if r.Usage != nil {
		res.Usage = r.Usage
	}
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&res.Provider, r.Provider)
	set(&res.Biller, r.Biller)
	set(&res.Model, r.Model)
	set(&res.BillingType, r.BillingType)
	set(&res.SessionID, r.SessionID)
	set(&res.Summary, r.Summary)
	if r.CostUSD != nil {
		res.CostUSD = r.CostUSD
	}
	if r.CacheAdjustedCostUSD != nil {
		res.CacheAdjustedCostUSD = r.CacheAdjustedCostUSD
	}
}
