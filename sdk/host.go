package sdk

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"google.golang.org/grpc"

	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// Host reaches the host services over one connection opened at Configure. Each service is
// gated by a manifest capability; a call without it fails with PermissionDenied.
type Host struct {
	Activity   hostv1.ActivityClient
	Authz      hostv1.AuthzClient
	Principals hostv1.PrincipalsClient
	Companies  hostv1.CompaniesClient
	Calls      hostv1.CallsClient
	Jobs       hostv1.JobsClient
	Events     hostv1.EventsClient
	Settings   hostv1.SettingsClient
	Secrets    hostv1.SecretsClient
	Storage    hostv1.StorageClient

	// activity carries concurrent activity appends in one call (activity_batch.go); nil
	// in a Host not made by NewHost, which appends each entry alone.
	activity *activityBatcher
}

// NewHost returns the host service clients over conn.
func NewHost(conn grpc.ClientConnInterface) *Host {
	h := &Host{
		Activity:   hostv1.NewActivityClient(conn),
		Authz:      hostv1.NewAuthzClient(conn),
		Principals: hostv1.NewPrincipalsClient(conn),
		Companies:  hostv1.NewCompaniesClient(conn),
		Calls:      hostv1.NewCallsClient(conn),
		Jobs:       hostv1.NewJobsClient(conn),
		Events:     hostv1.NewEventsClient(conn),
		Settings:   hostv1.NewSettingsClient(conn),
		Secrets:    hostv1.NewSecretsClient(conn),
		Storage:    hostv1.NewStorageClient(conn),
	}
	h.activity = &activityBatcher{h: h}
	return h
}

// ActivityEntry is what LogActivity appends.
type ActivityEntry struct {
	CompanyID  string
	Actor      *Actor
	Action     string
	EntityType string
	EntityID   string
	Details    any
}

// LogActivity appends an activity entry, attributing it to the actor when one is given
// and to the extension otherwise. Entries that goroutines of this process log at the same
// time travel to the host in one call (see AppendActivity).
func (h *Host) LogActivity(ctx context.Context, e *ActivityEntry) error {
	req := &hostv1.AppendActivityRequest{CompanyId: e.CompanyID, Action: e.Action, EntityType: e.EntityType, EntityId: e.EntityID}
	if a := e.Actor; a != nil {
		switch a.Type {
		case "agent":
			req.ActorType, req.ActorId, req.AgentId, req.RunId = "agent", a.AgentId, a.AgentId, a.RunId
		case "board":
			req.ActorType, req.ActorId = "user", a.UserId
		}
	}
	if e.Details != nil {
		b, err := json.Marshal(e.Details)
		if err != nil {
			return fmt.Errorf("error encoding activity details: %w", err)
		}
		req.DetailsJson = b
	}
	if _, errs := h.AppendActivity(ctx, req); errs[0] != nil {
		return fmt.Errorf("error appending activity %s: %w", e.Action, errs[0])
	}
	return nil
}

// Call invokes another extension's provided method ("owner.method", declared in the
// manifest's uses) with input encoded as JSON and decodes the result into out (may be nil).
// A failure of the callee comes back as an *Error with its status.
func (h *Host) Call(ctx context.Context, method string, actor *Actor, companyID string, input, out any) error {
	in, err := json.Marshal(input)
	if err != nil {
		return fmt.Errorf("error encoding input of %s: %w", method, err)
	}
	res, err := h.Calls.Invoke(ctx, &hostv1.InvokeRequest{Method: method, InputJson: in, Actor: actor, CompanyId: companyID})
	if err != nil {
		return fmt.Errorf("error calling %s: %w", method, err)
	}
	if res.Error != nil {
		return FromProtoError(res.Error)
	}
	if out != nil && len(res.OutputJson) > 0 {
		if err := json.Unmarshal(res.OutputJson, out); err != nil {
			return fmt.Errorf("error decoding result of %s: %w", method, err)
		}
	}
	return nil
}

// Typed returns a typed caller for one method, for extensions that call it often.
func Typed[In, Out any](h *Host, method string) func(ctx context.Context, actor *Actor, companyID string, in In) (*Out, error) {
	return func(ctx context.Context, actor *Actor, companyID string, in In) (*Out, error) {
		out := new(Out)
		if err := h.Call(ctx, method, actor, companyID, in, out); err != nil {
			return nil, err
		}
		return out, nil
	}
}

// SystemActor is the actor of work the extension does on its own behalf.
func SystemActor() *Actor { return &extensionv1.Actor{Type: "system"} }

// RequirePermission asks the kernel whether the request's actor holds a permission key in
// a company; a refusal is a 403 *Error carrying the kernel's reason (code permission_denied).
func (h *Host) RequirePermission(ctx context.Context, companyID, permission string) error {
	res, err := h.Authz.Check(ctx, &hostv1.CheckRequest{Actor: ActorFrom(ctx), CompanyId: companyID, Permission: permission})
	if err != nil {
		return fmt.Errorf("error checking permission %s: %w", permission, err)
	}
	if !res.Allowed {
		return &Error{Status: http.StatusForbidden, Message: res.Reason, Code: "permission_denied"}
	}
	return nil
}
