package kernel

import (
	"context"
	"slices"
)

// ActorType is the kind of caller the kernel resolved for a request.
type ActorType string

// Actor types.
const (
	ActorNone   ActorType = "none"
	ActorBoard  ActorType = "board"
	ActorAgent  ActorType = "agent"
	ActorSystem ActorType = "system"
)

// Actor sources, saying how the actor was authenticated.
const (
	SourceLocalImplicit = "local_implicit"
	SourceSession       = "session"
	SourceBoardKey      = "board_key"
	SourceAgentKey      = "agent_key"
	SourceAgentJWT      = "agent_jwt"
)

// LocalBoardUserID is the implicit board user of local_trusted mode.
const LocalBoardUserID = "local-board"

// Membership is one company membership carried by a board actor.
type Membership struct {
	CompanyID      string `json:"companyId"`
	MembershipRole string `json:"membershipRole"`
	Status         string `json:"status"`
}

// Actor is the resolved caller of a request, attached to its context.
type Actor struct {
	Type   ActorType
	Source string
	// UserID is set for board actors.
	UserID string
	// AgentID and CompanyID are set for agent actors.
	AgentID   string
	CompanyID string
	// AgentRole is the agent's role, used for implicit authority (the CEO).
	AgentRole string
	// RunID comes from X-Service-Run-Id or the agent JWT.
	RunID string
	KeyID string
	// KeyScope is the scope kind of an agent credential (standard, task_bridge, skill_test).
	KeyScope        string
	IsInstanceAdmin bool
	Memberships     []Membership
}

// IsBoard reports whether the actor is a board actor.
func (a *Actor) IsBoard() bool { return a != nil && a.Type == ActorBoard }

// IsAgent reports whether the actor is an agent actor.
func (a *Actor) IsAgent() bool { return a != nil && a.Type == ActorAgent }

// IsLocalImplicit reports whether the actor is the trusted local board.
func (a *Actor) IsLocalImplicit() bool { return a != nil && a.Source == SourceLocalImplicit }

// CompanyIDs lists the companies of the actor's active memberships (agents: their own).
func (a *Actor) CompanyIDs() []string {
	if a == nil {
		return nil
	}
	if a.Type == ActorAgent {
		return []string{a.CompanyID}
	}
	ids := make([]string, 0, len(a.Memberships))
	for _, m := range a.Memberships {
		if m.Status == "active" {
			ids = append(ids, m.CompanyID)
		}
	}
	return ids
}

// ReadOnlyRole is the membership role that may read a company but change nothing in it.
const ReadOnlyRole = "viewer"

// ReadOnlyCompanyIDs lists the companies where the actor is an active member who may read
// but not write (the viewer role). Instance admins and the local board write everywhere.
func (a *Actor) ReadOnlyCompanyIDs() []string {
	if a == nil || a.Type != ActorBoard || a.IsInstanceAdmin || a.IsLocalImplicit() {
		return nil
	}
	var ids []string
	for _, m := range a.Memberships {
		if m.Status == "active" && m.MembershipRole == ReadOnlyRole {
			ids = append(ids, m.CompanyID)
		}
	}
	return ids
}

// CanWriteCompany reports whether an actor with access to the company may change things in
// it: everyone but a viewer.
func (a *Actor) CanWriteCompany(companyID string) bool {
	return !slices.Contains(a.ReadOnlyCompanyIDs(), companyID)
}

// IsWriteMethod reports whether an HTTP method changes state.
func IsWriteMethod(method string) bool {
	switch method {
	case "GET", "HEAD", "OPTIONS":
		return false
	}
	return true
}

// MembershipFor returns the actor's membership in the company, if any.
func (a *Actor) MembershipFor(companyID string) (Membership, bool) {
	if a == nil {
		return Membership{}, false
	}
	for _, m := range a.Memberships {
		if m.CompanyID == companyID {
			return m, true
		}
	}
	return Membership{}, false
}

type actorKey struct{}

// WithActor returns a context carrying the actor.
func WithActor(ctx context.Context, a *Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// ActorFrom returns the actor attached to ctx, or a none actor.
func ActorFrom(ctx context.Context) *Actor {
	if a, ok := ctx.Value(actorKey{}).(*Actor); ok && a != nil {
		return a
	}
	return &Actor{Type: ActorNone}
}
