package kernel

import (
	"context"
	"strings"
	"time"
)

// logLevels orders log levels for the logs route's minimum-level filter.
var logLevels = map[string]int{"trace": 0, "debug": 1, "info": 2, "warn": 3, "warning": 3, "error": 4}

type logsRequest struct {
	PluginID string `path:"pluginId"`
	Limit    *int   `query:"limit"`
	Level    string `query:"level"`
}

type pluginLogsEndpoint struct{ k *Kernel }

func (e *pluginLogsEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/plugins/{pluginId}/logs", Access: AccessInstanceAdmin,
		Summary: "A plugin's recent log lines from this node, newest first (limit 1-1000, default 100; level is a minimum)"}
}

func (e *pluginLogsEndpoint) Execute(ctx context.Context, req *logsRequest) (*[]PluginLogLine, error) {
	limit, err := limitParam(req.Limit, 100, 1000)
	if err != nil {
		return nil, err
	}
	min := -1
	if req.Level != "" {
		l, ok := logLevels[strings.ToLower(req.Level)]
		if !ok {
			return nil, ValidationError(ValidationDetail{Path: "level", Message: "must be one of trace, debug, info, warn, error"})
		}
		min = l
	}
	p, err := e.k.pluginByID(ctx, req.PluginID)
	if err != nil {
		return nil, err
	}
	out := []PluginLogLine{}
	if e.k.pluginRuntime == nil {
		return &out, nil
	}
	lines := e.k.pluginRuntime.PluginLogs(p.rec.PluginKey, 0)
	for i := len(lines) - 1; i >= 0 && len(out) < limit; i-- {
		if l, ok := logLevels[strings.ToLower(lines[i].Level)]; min >= 0 && (!ok || l < min) {
			continue
		}
		out = append(out, lines[i])
	}
	return &out, nil
}

// PluginDashboard is one call's view of a plugin: health, jobs, recent runs and deliveries,
// and recent errors.
type PluginDashboard struct {
	PluginID                string             `json:"pluginId"`
	PluginKey               string             `json:"pluginKey"`
	Version                 string             `json:"version"`
	Status                  string             `json:"status"`
	Enabled                 bool               `json:"enabled"`
	LastError               *string            `json:"lastError"`
	Health                  *ExtensionHealth   `json:"health"`
	Jobs                    []*PluginJob       `json:"jobs"`
	RecentJobRuns           []*PluginJobRun    `json:"recentJobRuns"`
	RecentWebhookDeliveries []*WebhookDelivery `json:"recentWebhookDeliveries"`
	RecentErrors            []PluginLogLine    `json:"recentErrors"`
	Tools                   int                `json:"tools"`
	Webhooks                int                `json:"webhooks"`
	CheckedAt               time.Time          `json:"checkedAt"`
}

type pluginDashboardEndpoint struct{ k *Kernel }

func (e *pluginDashboardEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/plugins/{pluginId}/dashboard", Access: AccessInstanceAdmin,
		Summary: "A plugin's dashboard: health, jobs, the last 10 job runs and webhook deliveries, recent errors"}
}

func (e *pluginDashboardEndpoint) Execute(ctx context.Context, req *pluginRequest) (*PluginDashboard, error) {
	p, err := e.k.pluginByID(ctx, req.PluginID)
	if err != nil {
		return nil, err
	}
	health, err := (&pluginHealthEndpoint{e.k}).Execute(ctx, req)
	if err != nil {
		return nil, err
	}
	jobs, err := (&pluginJobsEndpoint{e.k}).Execute(ctx, req)
	if err != nil {
		return nil, err
	}
	runs, err := e.k.JobRunList(ctx, p.rec.PluginKey, "", 10)
	if err != nil {
		return nil, Internal(err)
	}
	deliveries, err := e.k.WebhookDeliveryList(ctx, p.rec.PluginKey, 10)
	if err != nil {
		return nil, Internal(err)
	}
	errs := []PluginLogLine{}
	if e.k.pluginRuntime != nil {
		lines := e.k.pluginRuntime.PluginLogs(p.rec.PluginKey, 0)
		for i := len(lines) - 1; i >= 0 && len(errs) < 10; i-- {
			if logLevels[strings.ToLower(lines[i].Level)] >= logLevels["warn"] {
				errs = append(errs, lines[i])
			}
		}
	}
	return &PluginDashboard{PluginID: p.rec.ID, PluginKey: p.rec.PluginKey, Version: p.rec.Version, Status: p.rec.Status,
		Enabled: p.rec.Enabled, LastError: p.rec.LastError, Health: health, Jobs: *jobs, RecentJobRuns: runs,
		RecentWebhookDeliveries: deliveries, RecentErrors: errs, Tools: len(p.mf.Tools), Webhooks: len(p.mf.Webhooks),
		CheckedAt: time.Now().UTC()}, nil
}
