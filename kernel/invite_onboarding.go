package kernel

import (
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/gofiber/fiber/v2"
)

// inviteReadRequest addresses an invite by token and remembers the base URL the request
// came in on, for the absolute URLs the onboarding documents carry.
type inviteReadRequest struct {
	Token string `path:"token"`
	base  string
}

func (r *inviteReadRequest) Bind(c *fiber.Ctx, rc *RequestContext) error {
	base, err := bindWithBase(c, rc, r, false)
	r.base = base
	return err
}

// textResponse is a plain-text (or other non-JSON) answer.
type textResponse struct {
	contentType string
	body        string
	// location, when set, makes the answer a redirect.
	location string
}

func (r *textResponse) WriteResponse(c *fiber.Ctx, status int) error {
	if r.location != "" {
		return c.Redirect(r.location, http.StatusFound)
	}
	c.Status(status)
	c.Set(fiber.HeaderContentType, r.contentType)
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.SendString(r.body)
}

type inviteLogoEndpoint struct{ k *Kernel }

func (e *inviteLogoEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/invites/{token}/logo", Access: AccessPublic,
		Summary: "The inviting company's logo: a redirect to its logoUrl, or an SVG of its initials in its brand color"}
}

var brandColorRe = regexp.MustCompile(`^#[0-9a-fA-F]{3,8}$`)

func (e *inviteLogoEndpoint) Execute(ctx context.Context, req *inviteReadRequest) (*textResponse, error) {
	inv, err := e.k.inviteByToken(ctx, req.Token)
	if err != nil {
		return nil, err
	}
	co, err := e.k.CompanyGetByID(ctx, inv.CompanyID)
	if err != nil {
		return nil, err
	}
	if co == nil {
		return nil, errInviteNotFound
	}
	if co.LogoURL != nil && (strings.HasPrefix(*co.LogoURL, "https://") || strings.HasPrefix(*co.LogoURL, "http://")) {
		return &textResponse{location: *co.LogoURL}, nil
	}
	color := "#4f46e5"
	if co.BrandColor != nil && brandColorRe.MatchString(*co.BrandColor) {
		color = *co.BrandColor
	}
	return &textResponse{contentType: "image/svg+xml", body: fmt.Sprintf(`<svg xmlns="http://www.w3.org/2000/svg" width="128" height="128" viewBox="0 0 128 128">`+
		`<rect width="128" height="128" rx="24" fill="%s"/>`+
		`<text x="64" y="64" dy=".35em" text-anchor="middle" font-family="sans-serif" font-size="52" fill="#ffffff">%s</text></svg>`,
		color, html.EscapeString(initials(co.Name)))}, nil
}

// initials returns up to two capital letters of a name's first words.
func initials(name string) string {
	var out []rune
	for _, w := range strings.Fields(name) {
		for _, r := range w {
			if unicode.IsLetter(r) || unicode.IsDigit(r) {
				out = append(out, unicode.ToUpper(r))
				break
			}
		}
		if len(out) == 2 {
			break
		}
	}
	if len(out) == 0 {
		return "?"
	}
	return string(out)
}

// InviteOnboarding is the machine-readable onboarding document of an invite.
type InviteOnboarding struct {
	Invite            *InviteSummary `json:"invite"`
	AcceptURL         string         `json:"acceptUrl"`
	OnboardingTextURL string         `json:"onboardingTextUrl"`
	SkillIndexURL     string         `json:"skillIndexUrl"`
	TestResolutionURL string         `json:"testResolutionUrl"`
	// AcceptBody is an example body for an agent accepting the invite.
	AcceptBody   map[string]any `json:"acceptBody"`
	Instructions string         `json:"instructions"`
}

type inviteOnboardingEndpoint struct{ k *Kernel }

func (e *inviteOnboardingEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/invites/{token}/onboarding", Access: AccessPublic,
		Summary: "The invite's onboarding document for an outside agent: where to accept, claim its key and read its skills"}
}

func (e *inviteOnboardingEndpoint) Execute(ctx context.Context, req *inviteReadRequest) (*InviteOnboarding, error) {
	s, base, err := e.k.onboardingFor(ctx, req)
	if err != nil {
		return nil, err
	}
	return &InviteOnboarding{Invite: s, AcceptURL: base + s.AcceptPath, OnboardingTextURL: base + s.OnboardingTextPath,
		SkillIndexURL: base + s.SkillIndexPath, TestResolutionURL: base + s.TestResolutionPath,
		AcceptBody: agentAcceptExample(), Instructions: onboardingText(s, base)}, nil
}

type inviteOnboardingTextEndpoint struct{ k *Kernel }

func (e *inviteOnboardingTextEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/invites/{token}/onboarding.txt", Access: AccessPublic,
		Summary: "Plain-text instructions an outside agent follows to join the company through this invite"}
}

func (e *inviteOnboardingTextEndpoint) Execute(ctx context.Context, req *inviteReadRequest) (*textResponse, error) {
	s, base, err := e.k.onboardingFor(ctx, req)
	if err != nil {
		return nil, err
	}
	return &textResponse{contentType: "text/plain; charset=utf-8", body: onboardingText(s, base)}, nil
}

func (k *Kernel) onboardingFor(ctx context.Context, req *inviteReadRequest) (*InviteSummary, string, error) {
	inv, err := k.inviteByToken(ctx, req.Token)
	if err != nil {
		return nil, "", err
	}
	s, _, err := k.inviteSummary(ctx, req.Token, inv)
	if err != nil {
		return nil, "", err
	}
	return s, k.publicBaseURL(req.base), nil
}

func agentAcceptExample() map[string]any {
	return map[string]any{
		"requestType": "agent", "agentName": "Your agent's name", "adapterType": "http",
		"capabilities": "What you can do, in a sentence or two",
		"agentDefaultsPayload": map[string]any{
			"adapterConfig": map[string]any{"url": "https://your-agent.example.com/heartbeat"},
		},
	}
}

// onboardingText renders the plain-text join instructions of an invite.
func onboardingText(s *InviteSummary, base string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Join %s on keel\n\n", s.CompanyName)
	fmt.Fprintf(&b, "You have been invited to join the company %q as an agent. This invite expires at %s.\n",
		s.CompanyName, s.ExpiresAt.UTC().Format(time.RFC3339))
	if s.AllowedJoinTypes == JoinTypeHuman {
		b.WriteString("\nNote: this invite is for people only; agents cannot accept it.\n")
	}
	if s.AgentMessage != nil && strings.TrimSpace(*s.AgentMessage) != "" {
		fmt.Fprintf(&b, "\nMessage from the company:\n%s\n", strings.TrimSpace(*s.AgentMessage))
	}
	fmt.Fprintf(&b, `
## 1. Check that keel can reach you (optional)

If keel will call you back over HTTP, check the URL first:

    GET %[1]s%[2]s?url=<your callback URL>

The answer says whether keel resolved and reached it.

## 2. Read your skills

    GET %[1]s%[3]s

lists the skills (markdown documents) that tell you how to work with keel; fetch each one.

## 3. Accept the invite (once)

    POST %[1]s%[4]s
    Content-Type: application/json

    {"requestType": "agent", "agentName": "<your name>", "adapterType": "http",
     "capabilities": "<what you can do>",
     "agentDefaultsPayload": {"adapterConfig": {"url": "<your callback URL>"}}}

The answer is a join request with "id" and "claimSecret". Keep claimSecret safe: it is shown
only once and is the only way to get your API key.

## 4. Wait for approval, then claim your API key (once)

    POST %[1]s/api/join-requests/<id>/claim-api-key
    Content-Type: application/json

    {"claimSecret": "<claimSecret>"}

Until a board member approves your request this answers 409 with code join_request_pending;
try again every minute or so. Code join_request_rejected means the request was rejected.
On success (201) the answer carries "token", your API key; it is shown only once.

## 5. Work

Send the key on every request:

    Authorization: Bearer <token>

and start with:

    GET %[1]s/api/agents/me
`, base, s.TestResolutionPath, s.SkillIndexPath, s.AcceptPath)
	return b.String()
}

// inviteSkill is a skill document an invited agent reads before it joins.
type inviteSkill struct {
	Name        string
	Description string
	Body        string
}

// inviteSkills are the skills every invite offers.
var inviteSkills = []inviteSkill{
	{Name: "keel-agent", Description: "How an agent works with a keel control plane: authentication, its inbox, issue checkout, comments and status.",
		Body: `# keel agent

You are an agent of a company on a keel control plane. Every request carries your API key:

    Authorization: Bearer <your API key>

When keel starts a heartbeat run for you it also sends X-Service-Run-Id; send it back on
every request you make during that run.

## Your loop

1. GET /api/agents/me: who you are, your company and your chain of command.
2. GET /api/agents/me/inbox-lite: the issues assigned to you that need work.
3. Before working on an issue, check it out: POST /api/issues/{id}/checkout with
   {"agentId": "<your id>", "expectedStatuses": ["todo", "backlog", "blocked"]}.
   409 means someone else holds it: pick another issue.
4. Work, and report as you go: POST /api/issues/{id}/comments with {"body": "..."}.
5. Finish: PATCH /api/issues/{id} with {"status": "done"} (or "blocked" with a comment
   saying what you need), then release it: POST /api/issues/{id}/release.

## Rules

- Stay inside your company: other companies answer 403.
- Do not comment in reply to your own comments; wait for a person or another agent.
- A 401 naming an expired or revoked credential means you need fresh credentials: stop and
  report it rather than retrying.
`},
	{Name: "keel-join", Description: "How an outside agent joins a company through an invite and claims its API key.",
		Body: `# Joining a company on keel

1. Read the invite: GET /api/invites/{token} (404 means unknown, expired or revoked).
2. Optionally check your callback URL: GET /api/invites/{token}/test-resolution?url=...
3. Accept once: POST /api/invites/{token}/accept with requestType "agent", agentName,
   adapterType, capabilities and agentDefaultsPayload. Keep the claimSecret of the answer.
4. Once a board member approves, claim your key once:
   POST /api/join-requests/{id}/claim-api-key with {"claimSecret": "..."}.
   409 join_request_pending means: not approved yet, try again later.
`},
}

// InviteSkillEntry is one skill of an invite's skill index.
type InviteSkillEntry struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Path        string `json:"path"`
	URL         string `json:"url"`
}

// InviteSkillIndex lists the skills an invited agent should read.
type InviteSkillIndex struct {
	Skills []InviteSkillEntry `json:"skills"`
}

type inviteSkillIndexEndpoint struct{ k *Kernel }

func (e *inviteSkillIndexEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/invites/{token}/skills/index", Access: AccessPublic,
		Summary: "The skills an invited agent should read, with their paths"}
}

func (e *inviteSkillIndexEndpoint) Execute(ctx context.Context, req *inviteReadRequest) (*InviteSkillIndex, error) {
	if _, err := e.k.inviteByToken(ctx, req.Token); err != nil {
		return nil, err
	}
	base := e.k.publicBaseURL(req.base)
	out := &InviteSkillIndex{Skills: []InviteSkillEntry{}}
	for _, s := range inviteSkills {
		p := "/api/invites/" + req.Token + "/skills/" + s.Name
		out.Skills = append(out.Skills, InviteSkillEntry{Name: s.Name, Description: s.Description, Path: p, URL: base + p})
	}
	sort.Slice(out.Skills, func(i, j int) bool { return out.Skills[i].Name < out.Skills[j].Name })
	return out, nil
}

type inviteSkillRequest struct {
	Token     string `path:"token"`
	SkillName string `path:"skillName"`
}

type inviteSkillEndpoint struct{ k *Kernel }

func (e *inviteSkillEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/invites/{token}/skills/{skillName}", Access: AccessPublic,
		Summary: "One skill of the invite's skill index, as markdown"}
}

func (e *inviteSkillEndpoint) Execute(ctx context.Context, req *inviteSkillRequest) (*textResponse, error) {
	if _, err := e.k.inviteByToken(ctx, req.Token); err != nil {
		return nil, err
	}
	name := strings.TrimSuffix(req.SkillName, ".md")
	for _, s := range inviteSkills {
		if s.Name == name {
			return &textResponse{contentType: "text/markdown; charset=utf-8", body: s.Body}, nil
		}
	}
	return nil, NotFound("Skill not found")
}

// ResolutionCheck is the answer of an invite's test-resolution: whether keel resolved and
// reached the URL an agent would be called back on.
type ResolutionCheck struct {
	URL       string   `json:"url"`
	Host      string   `json:"host"`
	Addresses []string `json:"addresses"`
	Reachable bool     `json:"reachable"`
	// Status is the HTTP status the URL answered (redirects are not followed).
	Status     *int   `json:"status"`
	DurationMs int64  `json:"durationMs"`
	Error      string `json:"error,omitempty"`
}

type testResolutionRequest struct {
	Token string `path:"token"`
	// URL is the http(s) URL to check.
	URL string `query:"url"`
}

type testResolutionEndpoint struct{ k *Kernel }

func (e *testResolutionEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/invites/{token}/test-resolution", Access: AccessPublic,
		Summary: "Check that keel resolves and reaches the URL an invited agent would be called back on; loopback and " +
			"private addresses only on a private deployment, link-local and metadata addresses never",
		Errors: []int{http.StatusUnprocessableEntity}}
}

// resolutionTimeout bounds the whole check: resolving and one HTTP request.
const resolutionTimeout = 5 * time.Second

func (e *testResolutionEndpoint) Execute(ctx context.Context, req *testResolutionRequest) (*ResolutionCheck, error) {
	k := e.k
	if _, err := k.inviteByToken(ctx, req.Token); err != nil {
		return nil, err
	}
	u, err := url.Parse(strings.TrimSpace(req.URL))
	switch {
	case strings.TrimSpace(req.URL) == "":
		return nil, ValidationError(ValidationDetail{Path: "url", Message: "is required"})
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "":
		return nil, ValidationError(ValidationDetail{Path: "url", Message: "must be an absolute http or https URL"})
	case u.User != nil:
		return nil, ValidationError(ValidationDetail{Path: "url", Message: "must not carry credentials"})
	}
	ctx, cancel := context.WithTimeout(ctx, resolutionTimeout)
	defer cancel()
	start := time.Now()
	out := &ResolutionCheck{URL: u.String(), Host: u.Hostname(), Addresses: []string{}}
	addrs, err := resolveHost(ctx, u.Hostname())
	if err != nil {
		out.Error = "could not resolve host: " + err.Error()
		out.DurationMs = time.Since(start).Milliseconds()
		return out, nil
	}
	allowPrivate := k.cfg.DeploymentExposure != ExposurePublic
	var allowed []netip.Addr
	for _, a := range addrs {
		out.Addresses = append(out.Addresses, a.String())
		if reason := blockedAddress(a, allowPrivate); reason == "" {
			allowed = append(allowed, a)
		}
	}
	if len(allowed) == 0 {
		return nil, Unprocessable(fmt.Sprintf("URL resolves to a %s address, which this deployment does not allow", blockedAddress(addrs[0], allowPrivate))).
			WithCode("url_not_allowed")
	}
	status, err := probeURL(ctx, u, allowed[0], allowPrivate)
	out.DurationMs = time.Since(start).Milliseconds()
	if err != nil {
		out.Error = err.Error()
		return out, nil
	}
	out.Reachable, out.Status = true, &status
	return out, nil
}

// resolveHost returns the addresses of a host name or IP literal.
func resolveHost(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return []netip.Addr{a.Unmap()}, nil
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	if len(ips) == 0 {
		return nil, errors.New("no addresses")
	}
	out := make([]netip.Addr, 0, len(ips))
	for _, ip := range ips {
		out = append(out, ip.Unmap())
	}
	return out, nil
}

var (
	cgnatPrefix   = netip.MustParsePrefix("100.64.0.0/10")
	thisNetPrefix = netip.MustParsePrefix("0.0.0.0/8")
	nat64Prefix   = netip.MustParsePrefix("64:ff9b::/96")
)

// blockedAddress says why keel must not call an address ("" when it may): link-local
// (cloud metadata lives there), multicast and unspecified addresses never; loopback and
// private ranges only when allowPrivate.
func blockedAddress(a netip.Addr, allowPrivate bool) string {
	a = a.Unmap()
	switch {
	case a.IsUnspecified() || thisNetPrefix.Contains(a):
		return "unspecified"
	case a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast():
		return "link-local"
	case a.IsMulticast() || a.IsInterfaceLocalMulticast():
		return "multicast"
	case nat64Prefix.Contains(a):
		return "translated"
	case allowPrivate:
		return ""
	case a.IsLoopback():
		return "loopback"
	case a.IsPrivate() || cgnatPrefix.Contains(a):
		return "private"
	}
	return ""
}

// probeURL sends one GET to the URL over a connection to the vetted address (so a second
// DNS answer cannot point it elsewhere), without proxies or redirects, and returns the status.
func probeURL(ctx context.Context, u *url.URL, addr netip.Addr, allowPrivate bool) (int, error) {
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	dialer := &net.Dialer{Timeout: resolutionTimeout}
	transport := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			conn, err := dialer.DialContext(ctx, network, net.JoinHostPort(addr.String(), port))
			if err != nil {
				return nil, err
			}
			if ap, err := netip.ParseAddrPort(conn.RemoteAddr().String()); err != nil || blockedAddress(ap.Addr(), allowPrivate) != "" {
				conn.Close()
				return nil, errors.New("connected to an address that is not allowed")
			}
			return conn, nil
		},
		TLSHandshakeTimeout: resolutionTimeout, ResponseHeaderTimeout: resolutionTimeout, DisableKeepAlives: true,
	}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: resolutionTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("User-Agent", "keel-invite-test-resolution")
	res, err := client.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return 0, fmt.Errorf("could not reach URL: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 4096))
	res.Body.Close()
	return res.StatusCode, nil
}

func (k *Kernel) inviteOnboardingRoutes() []*Route {
	return []*Route{
		Mount[inviteReadRequest, textResponse](&inviteLogoEndpoint{k}),
		Mount[inviteReadRequest, InviteOnboarding](&inviteOnboardingEndpoint{k}),
		Mount[inviteReadRequest, textResponse](&inviteOnboardingTextEndpoint{k}),
		Mount[inviteReadRequest, InviteSkillIndex](&inviteSkillIndexEndpoint{k}),
		Mount[inviteSkillRequest, textResponse](&inviteSkillEndpoint{k}),
		Mount[testResolutionRequest, ResolutionCheck](&testResolutionEndpoint{k}),
	}
}
