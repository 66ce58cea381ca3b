package client

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"
)

// Challenge is a CLI auth challenge as created: Token is the secret only its CLI holds.
type Challenge struct {
	Raw
	ID                      string    `json:"id"`
	Token                   string    `json:"token"`
	Status                  string    `json:"status"`
	ApproveURL              string    `json:"approveUrl"`
	ExpiresAt               time.Time `json:"expiresAt"`
	SuggestedPollIntervalMs int       `json:"suggestedPollIntervalMs"`
}

// ChallengeCreate is the body of a new challenge.
type ChallengeCreate struct {
	ClientName string `json:"clientName,omitempty"`
	Command    string `json:"command,omitempty"`
	// RequestedAccess is "board" (default) or "instance_admin_required".
	RequestedAccess string `json:"requestedAccess,omitempty"`
}

// ChallengeState is a challenge as its CLI polls it; BoardAPIKey comes once, after approval.
type ChallengeState struct {
	Raw
	ID          string `json:"id"`
	Status      string `json:"status"`
	BoardAPIKey *struct {
		ID    string `json:"id"`
		Name  string `json:"name"`
		Token string `json:"token"`
	} `json:"boardApiKey"`
}

// Me is the resolved board caller.
type Me struct {
	Raw
	User *struct {
		ID    string `json:"id"`
		Email string `json:"email"`
		Name  string `json:"name"`
	} `json:"user"`
	IsInstanceAdmin bool   `json:"isInstanceAdmin"`
	Source          string `json:"source"`
}

var (
	epChallengeCreate = endpoint("POST", "/api/cli-auth/challenges", ChallengeCreate{}, Challenge{})
	epChallenge       = endpoint("GET", "/api/cli-auth/challenges/{id}", nil, ChallengeState{})
	epChallengeCancel = endpoint("POST", "/api/cli-auth/challenges/{id}/cancel", nil, nil)
	epMe              = endpoint("GET", "/api/cli-auth/me", nil, Me{})
	epRevokeCurrent   = endpoint("POST", "/api/cli-auth/revoke-current", nil, nil)
)

// CreateChallenge opens a CLI auth challenge; a board user approves it at ApproveURL.
func (c *Client) CreateChallenge(ctx context.Context, p ChallengeCreate) (*Challenge, error) {
	var out Challenge
	return &out, c.call(ctx, epChallengeCreate, nil, nil, p, &out)
}

// ErrChallengeEnded is returned by WaitForApproval when the challenge was cancelled or expired.
var ErrChallengeEnded = errors.New("the CLI auth challenge ended without approval")

// WaitForApproval polls a challenge with its token until it is approved and returns the
// board API key (pcp_board_…) it carries, or fails when it is cancelled or expires.
func (c *Client) WaitForApproval(ctx context.Context, ch *Challenge) (string, error) {
	interval := time.Duration(ch.SuggestedPollIntervalMs) * time.Millisecond
	if interval <= 0 {
		interval = time.Second
	}
	q := url.Values{"token": {ch.Token}}
	for {
		var st ChallengeState
		if err := c.call(ctx, epChallenge, []string{ch.ID}, q, nil, &st); err != nil {
			return "", err
		}
		switch {
		case st.BoardAPIKey != nil && st.BoardAPIKey.Token != "":
			return st.BoardAPIKey.Token, nil
		case st.Status == "approved":
			return "", fmt.Errorf("the challenge was approved but its key was already picked up")
		case st.Status == "cancelled" || st.Status == "expired":
			return "", fmt.Errorf("%w: %s", ErrChallengeEnded, st.Status)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(interval):
		}
	}
}

// CancelChallenge cancels a pending challenge with its token.
func (c *Client) CancelChallenge(ctx context.Context, ch *Challenge) error {
	return c.call(ctx, epChallengeCancel, []string{ch.ID}, url.Values{"token": {ch.Token}}, nil, nil)
}

// Me returns the board caller the client authenticates as.
func (c *Client) Me(ctx context.Context) (*Me, error) {
	var out Me
	return &out, c.call(ctx, epMe, nil, nil, nil, &out)
}

// RevokeCurrent revokes the board API key the client authenticates with.
func (c *Client) RevokeCurrent(ctx context.Context) error {
	return c.call(ctx, epRevokeCurrent, nil, nil, nil, nil)
}

// Health is the instance's health answer.
type Health struct {
	Raw
	Status             string `json:"status"`
	Version            string `json:"version"`
	DeploymentMode     string `json:"deploymentMode"`
	DeploymentExposure string `json:"deploymentExposure"`
}

var epHealth = endpoint("GET", "/api/health", nil, Health{})

// Health reads the instance's health: its version and deployment mode.
func (c *Client) Health(ctx context.Context) (*Health, error) {
	var out Health
	return &out, c.call(ctx, epHealth, nil, nil, nil, &out)
}
