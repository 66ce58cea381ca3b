package kernel

import (
	"context"
	"net/http"
	"time"
)

// Health is the body of GET /api/health.
type Health struct {
	Status             string         `json:"status"`
	Version            string         `json:"version"`
	ServerVersion      string         `json:"serverVersion"`
	DeploymentMode     string         `json:"deploymentMode"`
	DeploymentExposure string         `json:"deploymentExposure"`
	AuthReady          bool           `json:"authReady"`
	BootstrapStatus    string         `json:"bootstrapStatus"`
	Features           map[string]any `json:"features"`
	ServerInfo         map[string]any `json:"serverInfo"`
	Database           string         `json:"database"`
}

type healthEndpoint struct{ k *Kernel }

// healthRequest asks for readiness instead of liveness with ?ready=1.
type healthRequest struct {
	Ready bool `query:"ready"`
}

func (e *healthEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/health", Access: AccessPublic, Summary: "Reachability, version, deployment mode and exposure; with ready=1, readiness (503 until the database, migrations, job queue and every enabled extension are up)"}
}

func (e *healthEndpoint) Execute(ctx context.Context, req *healthRequest) (*Health, error) {
	k := e.k
	if req.Ready {
		if r := k.ready(ctx); r.Status != "ready" {
			return nil, (&APIError{Status: http.StatusServiceUnavailable, Message: "Not ready", Details: r}).WithCode("not_ready")
		}
	}
	dbStatus := "ok"
	pingCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := k.Pool.Ping(pingCtx); err != nil {
		dbStatus = "unreachable"
	}
	status := "ok"
	if dbStatus != "ok" {
		status = "degraded"
	}
	bootstrap := "ready"
	if k.cfg.DeploymentMode == ModeAuthenticated {
		var hasAdmin bool
		if err := k.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM kernel.instance_user_roles WHERE role = 'instance_admin')`).Scan(&hasAdmin); err == nil && !hasAdmin {
			bootstrap = "bootstrap_pending"
		}
	}
	return &Health{
		Status: status, Version: Version, ServerVersion: Version,
		DeploymentMode: k.cfg.DeploymentMode, DeploymentExposure: k.cfg.DeploymentExposure,
		AuthReady: true, BootstrapStatus: bootstrap, Database: dbStatus,
		Features:   map[string]any{"companyDeletionEnabled": k.cfg.EnableCompanyDeletion},
		ServerInfo: map[string]any{"processStartedAt": k.startedAt.UTC().Format(time.RFC3339Nano), "instanceId": k.instanceID},
	}, nil
}

func (k *Kernel) healthRoutes() []*Route {
	return []*Route{Mount[healthRequest, Health](&healthEndpoint{k})}
}
