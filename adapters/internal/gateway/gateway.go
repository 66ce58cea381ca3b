// Package gateway is what the two gateway adapters (theta_gateway over WebSocket,
// zeta_gateway over HTTP and server-sent events) share: secret references in their config
// resolved through the secrets owner, loopback detection for the plain-transport guard, and
// the redaction of credentials from what they log.
package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/keelhq/keel/sdk"
)

// SecretResolveMethod is the secrets owner's method a gateway adapter resolves a secret
// reference with; an adapter declares it in its manifest's uses.
const SecretResolveMethod = "secrets.resolve"

// SecretValue is a config field that holds a credential: a plain string, a
// {type:"plain", value} binding or a {type:"secret_ref", secretId, version} reference to a
// company secret (version "latest", a number, or absent for the latest).
type SecretValue struct {
	// Plain is the value given in the clear.
	Plain string
	// SecretID and Version name the company secret of a reference (Version 0 is latest).
	SecretID string
	Version  int
}

// IsSet reports whether the field holds a value or a reference.
func (v *SecretValue) IsSet() bool { return v != nil && (v.Plain != "" || v.SecretID != "") }

// IsRef reports whether the field is a secret reference.
func (v *SecretValue) IsRef() bool { return v != nil && v.SecretID != "" }

// UnmarshalJSON reads the three forms; anything else is an error naming what is expected.
func (v *SecretValue) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		*v = SecretValue{}
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &v.Plain)
	}
	var ref struct {
		Type     string          `json:"type"`
		Value    string          `json:"value"`
		SecretID string          `json:"secretId"`
		Version  json.RawMessage `json:"version"`
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		return fmt.Errorf("must be a string or a secret reference {type: secret_ref, secretId, version}")
	}
	switch ref.Type {
	case "plain":
		*v = SecretValue{Plain: ref.Value}
		return nil
	case "secret_ref":
		if strings.TrimSpace(ref.SecretID) == "" {
			return fmt.Errorf("a secret reference needs a secretId")
		}
		*v = SecretValue{SecretID: ref.SecretID}
		ver := strings.Trim(string(bytes.TrimSpace(ref.Version)), `"`)
		if ver != "" && ver != "latest" && ver != "null" {
			n, err := strconv.Atoi(ver)
			if err != nil || n < 1 {
				return fmt.Errorf(`a secret reference's version must be "latest" or a positive number`)
			}
			v.Version = n
		}
		return nil
	}
	return fmt.Errorf("must be a string or a secret reference {type: secret_ref, secretId, version}")
}

// Resolve returns the value: the plain one, or the referenced company secret's value read
// through the secrets owner (SecretResolveMethod) for companyID, audited with requester.
func (v *SecretValue) Resolve(ctx context.Context, host *sdk.Host, companyID, requester string) (string, error) {
	if v == nil || !v.IsRef() {
		if v == nil {
			return "", nil
		}
		return v.Plain, nil
	}
	if host == nil {
		return "", fmt.Errorf("no host to resolve secret %s", v.SecretID)
	}
	var out struct {
		Value string `json:"value"`
	}
	err := host.Call(ctx, SecretResolveMethod, sdk.SystemActor(), companyID, map[string]any{
		"companyId": companyID, "secretId": v.SecretID, "version": v.Version, "requester": requester,
	}, &out)
	if err != nil {
		if sdk.IsMethodNotProvided(err) {
			return "", fmt.Errorf("secret %s cannot be resolved: no secrets extension is loaded", v.SecretID)
		}
		return "", fmt.Errorf("error resolving secret %s: %w", v.SecretID, err)
	}
	return out.Value, nil
}

// IsLoopbackHost reports whether a URL host (without port) is this machine: localhost, a
// name under .localhost, or a loopback IP address.
func IsLoopbackHost(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Redactor replaces credentials in text with "[REDACTED]": the given secret values, Bearer
// tokens and the service's session keys ("service:…").
type Redactor struct {
	values []string
}

// NewRedactor returns a redactor of the given values (empty ones are skipped).
func NewRedactor(values ...string) *Redactor {
	r := &Redactor{}
	for _, v := range values {
		if len(v) >= 4 {
			r.values = append(r.values, v)
		}
	}
	return r
}

// Redact returns s with every known credential replaced.
func (r *Redactor) Redact(s string) string {
	for _, v := range r.values {
		s = strings.ReplaceAll(s, v, "[REDACTED]")
	}
	s = redactAfter(s, "Bearer ")
	return redactAfter(s, "service:")
}

// redactAfter replaces the token that follows each occurrence of prefix (up to a quote,
// space, comma, brace or end), keeping the prefix.
func redactAfter(s, prefix string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, prefix)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		b.WriteString(prefix)
		rest := s[i+len(prefix):]
		j := strings.IndexAny(rest, "\"' \t\r\n,}\\")
		if j < 0 {
			j = len(rest)
		}
		if j > 0 && !strings.HasPrefix(rest, "[REDACTED]") {
			b.WriteString("[REDACTED]")
		} else {
			b.WriteString(rest[:j])
		}
		s = rest[j:]
	}
}

// wakeVars are the run's variables a wake text lists, in order.
var wakeVars = []string{"SERVICE_RUN_ID", "SERVICE_AGENT_ID", "SERVICE_COMPANY_ID", "SERVICE_API_URL", "SERVICE_TASK_ID",
	"SERVICE_WAKE_REASON", "SERVICE_WAKE_COMMENT_ID", "SERVICE_APPROVAL_ID", "SERVICE_APPROVAL_STATUS", "SERVICE_LINKED_ISSUE_IDS"}

// WakeText is the message a gateway sends a remote agent for one run: who it is, the run's
// identity values (env, with apiURL overriding SERVICE_API_URL when set), how to call keel,
// the workflow, and the structured wake payload. keyHint says where the remote agent keeps
// its keel API key ("" to say nothing).
func WakeText(agentName string, env map[string]string, apiURL, keyHint string, wake map[string]any) string {
	var b strings.Builder
	name := agentName
	if name == "" {
		name = "an agent"
	}
	fmt.Fprintf(&b, "You are %s, an AI agent employee in a keel-managed company.\n\n", name)
	b.WriteString("Run identity:\n")
	for _, k := range wakeVars {
		v := env[k]
		if k == "SERVICE_API_URL" && apiURL != "" {
			v = apiURL
		}
		if v != "" {
			fmt.Fprintf(&b, "- %s=%s\n", k, v)
		}
	}
	if keyHint != "" {
		fmt.Fprintf(&b, "\nLoad SERVICE_API_KEY from %s.\n", keyHint)
	}
	b.WriteString(`
Execution contract:
- Call the keel API at SERVICE_API_URL with "Authorization: Bearer <SERVICE_API_KEY>" and "X-Service-Run-Id: <SERVICE_RUN_ID>" on every request.
- Workflow: 1. GET /api/agents/me. 2. With a SERVICE_TASK_ID, POST /api/issues/{id}/checkout with your agent id and the run id, read the issue and its comments, do the work, then PATCH its status (done or blocked) with a comment saying what you did. 3. Without one, list the issues assigned to you and work the highest-priority one.
- Never retry a 409. Do not expose secrets in logs, comments or final output.
`)
	if len(wake) > 0 {
		if p, err := json.MarshalIndent(wake, "", "  "); err == nil {
			b.WriteString("\nStructured wake payload JSON:\n```json\n")
			b.Write(p)
			b.WriteString("\n```\n")
		}
	}
	return b.String()
}
