package kernel

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5"
)

// InviteTypeBootstrapCEO is the invite that makes the signed-in person who accepts it the
// instance's first admin (REFERENCE.md 2.11). It belongs to no company. keel opens one at
// start when an authenticated instance exposed publicly has no instance admin (the browser
// first-admin claim is not available there), and `keel bootstrap-ceo` opens one on demand.
const InviteTypeBootstrapCEO = "bootstrap_ceo"

// BootstrapInviteTTL is how long a bootstrap_ceo invite stays usable.
const BootstrapInviteTTL = 72 * time.Hour

// BootstrapInvite is a new bootstrap_ceo invite; its token is shown only here (and in the
// line that announces it).
type BootstrapInvite struct {
	ID         string    `json:"id"`
	Token      string    `json:"token"`
	InvitePath string    `json:"invitePath"`
	InviteURL  string    `json:"inviteUrl"`
	ExpiresAt  time.Time `json:"expiresAt"`
}

// BootstrapInviteCreate opens a bootstrap_ceo invite, revoking any earlier one nobody
// accepted, so only the newest link works. base is the public base URL of the links.
func (k *Kernel) BootstrapInviteCreate(ctx context.Context, base string) (*BootstrapInvite, error) {
	b := &BootstrapInvite{ID: newID(), Token: InviteTokenPrefix + randomHex(24),
		ExpiresAt: time.Now().Add(BootstrapInviteTTL).UTC().Truncate(time.Millisecond)}
	b.InvitePath = "/api/invites/" + b.Token
	b.InviteURL = k.publicBaseURL(base) + b.InvitePath
	tx, err := k.Pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("error creating bootstrap invite: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, `UPDATE kernel.invites SET revoked_at = now(), updated_at = now()
		WHERE invite_type = $1 AND accepted_at IS NULL AND revoked_at IS NULL`, InviteTypeBootstrapCEO); err != nil {
		return nil, fmt.Errorf("error revoking earlier bootstrap invites: %w", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO kernel.invites (id, company_id, invite_type, token_hash, allowed_join_types, membership_role, expires_at)
		VALUES ($1, NULL, $2, $3, 'human', 'owner', $4)`, b.ID, InviteTypeBootstrapCEO, HashToken(b.Token), b.ExpiresAt); err != nil {
		return nil, fmt.Errorf("error creating bootstrap invite: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("error creating bootstrap invite: %w", err)
	}
	return b, nil
}

// HasInstanceAdmin reports whether any user holds the instance_admin role.
func (k *Kernel) HasInstanceAdmin(ctx context.Context) (bool, error) {
	var ok bool
	if err := k.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM kernel.instance_user_roles WHERE role = 'instance_admin')`).Scan(&ok); err != nil {
		return false, fmt.Errorf("error checking instance admins: %w", err)
	}
	return ok, nil
}

// announceBootstrapInvite opens a bootstrap_ceo invite and logs its URL when an
// authenticated, publicly exposed instance has no instance admin and no open bootstrap
// invite: nobody could administer it otherwise.
func (k *Kernel) announceBootstrapInvite(ctx context.Context) error {
	if k.cfg.DeploymentMode != ModeAuthenticated || k.cfg.DeploymentExposure != ExposurePublic {
		return nil
	}
	var adminOrOpen bool
	if err := k.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM kernel.instance_user_roles WHERE role = 'instance_admin')
		OR EXISTS (SELECT 1 FROM kernel.invites WHERE invite_type = $1 AND accepted_at IS NULL AND revoked_at IS NULL AND expires_at > now())`,
		InviteTypeBootstrapCEO).Scan(&adminOrOpen); err != nil {
		return fmt.Errorf("error checking instance admins: %w", err)
	}
	if adminOrOpen {
		return nil
	}
	b, err := k.BootstrapInviteCreate(ctx, "")
	if err != nil {
		return err
	}
	k.log.Warn("this instance has no instance admin; sign up and accept the bootstrap invite to become its admin "+
		"(run `keel bootstrap-ceo` for a new link)", "url", b.InviteURL, "expiresAt", b.ExpiresAt)
	return nil
}

// bootstrapInviteByToken returns the open bootstrap_ceo invite a token opens, or
// errInviteNotFound.
func (k *Kernel) bootstrapInviteByToken(ctx context.Context, token string) (*Invite, error) {
	if !strings.HasPrefix(token, InviteTokenPrefix) || len(token) > 200 {
		return nil, errInviteNotFound
	}
	var inv Invite
	err := k.Pool.QueryRow(ctx, `SELECT id::text, invite_type, allowed_join_types, membership_role, expires_at, created_at, updated_at
		FROM kernel.invites WHERE token_hash = $1 AND invite_type = $2 AND company_id IS NULL
			AND revoked_at IS NULL AND accepted_at IS NULL AND expires_at > now()`, HashToken(token), InviteTypeBootstrapCEO).
		Scan(&inv.ID, &inv.InviteType, &inv.AllowedJoinTypes, &inv.MembershipRole, &inv.ExpiresAt, &inv.CreatedAt, &inv.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errInviteNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("error reading bootstrap invite: %w", err)
	}
	inv.Status, inv.ExpiresAt = "active", inv.ExpiresAt.UTC()
	return &inv, nil
}

// bootstrapInviteSummary is what a bootstrap_ceo token shows: no company, a person only.
func bootstrapInviteSummary(token string, inv *Invite) *InviteSummary {
	return &InviteSummary{ID: inv.ID, InviteType: inv.InviteType, AllowedJoinTypes: JoinTypeHuman, MembershipRole: inv.MembershipRole,
		ExpiresAt: inv.ExpiresAt, AcceptPath: "/api/invites/" + token + "/accept"}
}

// BootstrapAccepted answers the acceptance of a bootstrap_ceo invite.
type BootstrapAccepted struct {
	InviteID          string `json:"inviteId"`
	InviteType        string `json:"inviteType"`
	BootstrapAccepted bool   `json:"bootstrapAccepted"`
	UserID            string `json:"userId"`
}

// acceptBootstrap makes the signed-in person instance admin and uses up the invite: 400
// for an agent join, 401 without a signed-in person.
func (k *Kernel) acceptBootstrap(ctx context.Context, req *inviteAcceptRequest, inv *Invite) (*JoinRequestAccepted, error) {
	a := ActorFrom(ctx)
	if t := strings.TrimSpace(req.RequestType); t != "" && t != JoinTypeHuman {
		return nil, BadRequest("Bootstrap invite requires human request type")
	}
	if !a.IsBoard() || a.UserID == "" {
		return nil, Unauthorized("Authenticated user required for bootstrap acceptance")
	}
	tx, err := k.Pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("error accepting bootstrap invite: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if err := consumeInvite(ctx, tx, inv.ID, a.UserID); err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO kernel.instance_user_roles (user_id, role) VALUES ($1, 'instance_admin')
		ON CONFLICT DO NOTHING`, a.UserID); err != nil {
		return nil, fmt.Errorf("error promoting instance admin: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("error accepting bootstrap invite: %w", err)
	}
	k.log.Info("bootstrap invite accepted: new instance admin", "user", a.UserID, "invite", inv.ID)
	return &JoinRequestAccepted{bootstrap: &BootstrapAccepted{InviteID: inv.ID, InviteType: InviteTypeBootstrapCEO,
		BootstrapAccepted: true, UserID: a.UserID}}, nil
}

// WriteResponse writes an accepted invite: a bootstrap acceptance is 202 with its own body.
func (r *JoinRequestAccepted) WriteResponse(c *fiber.Ctx, status int) error {
	if r.bootstrap != nil {
		return WriteJSON(c, http.StatusAccepted, r.bootstrap)
	}
	return WriteJSON(c, status, r)
}
