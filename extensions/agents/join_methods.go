package agents

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"time"

	"github.com/keelhq/keel/sdk"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

func init() {
	addRoutes(route{Method: "GET", Path: "/api/instance/scheduler-heartbeats", Access: sdk.AccessInstanceAdmin,
		Response: new([]schedulerHeartbeat),
		Summary:  "Agents of every company whose timer heartbeat is enabled, with interval, last heartbeat and next due time",
		Handle:   handleSchedulerHeartbeats})
}

// schedulerHeartbeat is one timer-driven agent as GET /api/instance/scheduler-heartbeats
// lists it.
type schedulerHeartbeat struct {
	ID              string     `json:"id"`
	CompanyID       string     `json:"companyId"`
	CompanyName     string     `json:"companyName"`
	AgentName       string     `json:"agentName"`
	Role            string     `json:"role"`
	Title           *string    `json:"title"`
	Status          string     `json:"status"`
	AdapterType     string     `json:"adapterType"`
	IntervalSec     int        `json:"intervalSec"`
	HeartbeatEnable bool       `json:"heartbeatEnabled"`
	SchedulerActive bool       `json:"schedulerActive"`
	LastHeartbeatAt *time.Time `json:"lastHeartbeatAt"`
	NextHeartbeatAt *time.Time `json:"nextHeartbeatAt"`
}

// handleSchedulerHeartbeats serves GET /api/instance/scheduler-heartbeats: every agent whose
// runtimeConfig.heartbeat is enabled, across companies; schedulerActive says whether the
// timer will actually wake it (a positive interval and an agent that is not paused,
// terminated or pending approval).
func handleSchedulerHeartbeats(a *Agents, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	rows, err := a.pool.Query(ctx, `SELECT agent_id::text, company_id::text, adapter_type, title, runtime_config, last_heartbeat_at
		FROM agent_configs WHERE coalesce(runtime_config->'heartbeat'->>'enabled', 'false') = 'true'`)
	if err != nil {
		a.writeErr(rw, err)
		return
	}
	out := []*schedulerHeartbeat{}
	for rows.Next() {
		var hb schedulerHeartbeat
		var raw []byte
		if err := rows.Scan(&hb.ID, &hb.CompanyID, &hb.AdapterType, &hb.Title, &raw, &hb.LastHeartbeatAt); err != nil {
			rows.Close()
			a.writeErr(rw, err)
			return
		}
		var rc agentRuntimeConfig
		_ = json.Unmarshal(raw, &rc)
		hb.HeartbeatEnable, hb.IntervalSec = rc.Heartbeat.Enabled, rc.Heartbeat.IntervalSec
		out = append(out, &hb)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		a.writeErr(rw, err)
		return
	}
	names := map[string]string{}
	kept := out[:0]
	for _, hb := range out {
		id, err := a.identity(ctx, hb.ID)
		if err != nil {
			a.writeErr(rw, err)
			return
		}
		if id == nil {
			continue
		}
		hb.AgentName, hb.Role, hb.Status = id.Name, id.Role, id.Status
		if _, ok := names[hb.CompanyID]; !ok {
			names[hb.CompanyID] = a.companyName(ctx, hb.CompanyID)
		}
		hb.CompanyName = names[hb.CompanyID]
		switch hb.Status {
		case statusTerminated, statusPendingApproval, "paused":
		default:
			hb.SchedulerActive = hb.IntervalSec > 0
		}
		if hb.SchedulerActive {
			next := time.Now().UTC()
			if hb.LastHeartbeatAt != nil {
				next = hb.LastHeartbeatAt.Add(time.Duration(hb.IntervalSec) * time.Second).UTC()
			}
			hb.NextHeartbeatAt = &next
		}
		kept = append(kept, hb)
	}
	sort.Slice(kept, func(i, j int) bool {
		if kept[i].CompanyName != kept[j].CompanyName {
			return kept[i].CompanyName < kept[j].CompanyName
		}
		return kept[i].AgentName < kept[j].AgentName
	})
	sdk.WriteJSON(rw, http.StatusOK, kept)
}

// companyName reads a company's name for display; "" when it cannot be read.
func (a *Agents) companyName(ctx context.Context, companyID string) string {
	res, err := a.host.Companies.Get(ctx, &hostv1.GetCompanyRequest{CompanyId: companyID})
	if err != nil {
		return ""
	}
	var c struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(res.CompanyJson, &c)
	return c.Name
}
