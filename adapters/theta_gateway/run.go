package thetagateway

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/keelhq/keel/adapters/internal/gateway"
	"github.com/keelhq/keel/adapters/internal/procrun"
	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/adapter"
)

const (
	// maxRetries and retryBase are the retries of a transient failure before dispatch
	// (2 s, then 4 s).
	maxRetries = 2
	retryBase  = 2 * time.Second
	// defaultProvider is the provider usage is reported under when the gateway names none.
	defaultProvider = "openclaw"
	// pairingScope is the scope the auto-pair connection adds.
	pairingScope = "operator.pairing"
	// maxEarlyEvents bounds the events kept until the agent request is answered.
	maxEarlyEvents = 1000
)

var errCancelled = errors.New("run cancelled")

// secrets are a run's resolved credentials.
type secrets struct {
	token, password, deviceToken string
	device                       ed25519.PrivateKey
}

// Execute runs one heartbeat run on the gateway (adapter.Runner). Config problems,
// refusals and failed agent runs are a failed result, not an error.
func (a *Adapter) Execute(ctx context.Context, req *adapter.ExecuteRequest) (*adapter.ExecuteResult, error) {
	c, err := ParseConfig(req.Config)
	if err != nil {
		var ce *configError
		code := "invalid_config"
		if errors.As(err, &ce) {
			code = ce.Code
		}
		return failed(code, err.Error()), nil
	}
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	a.mu.Lock()
	if _, dup := a.runs[req.RunID]; dup {
		a.mu.Unlock()
		return nil, &sdk.Error{Status: http.StatusConflict, Code: "run_executing", Message: fmt.Sprintf("run %s is already executing", req.RunID)}
	}
	a.runs[req.RunID] = cancel
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.runs, req.RunID)
		a.mu.Unlock()
	}()
	ev := procrun.NewEmitter(a.host, a.log, req.RunID, req.CompanyID)
	defer ev.Close()
	r := &run{a: a, c: c, req: req, ev: ev}
	s, err := a.resolveSecrets(rctx, c, req.CompanyID)
	if err != nil {
		r.red = gateway.NewRedactor()
		r.logf("[service] %v", err)
		return failed("openclaw_gateway_config_invalid", err.Error()), nil
	}
	r.sec = s
	r.sec.token = c.authToken(s.token)
	r.red = gateway.NewRedactor(r.sec.token, s.password, s.deviceToken)
	return r.execute(rctx), nil
}

// resolveSecrets reads the run's credentials, resolving secret references through the
// secrets owner, and the device key: the configured one, or an ephemeral key for this run.
func (a *Adapter) resolveSecrets(ctx context.Context, c *Config, companyID string) (*secrets, error) {
	s := &secrets{}
	for _, f := range []struct {
		v    *gateway.SecretValue
		dst  *string
		name string
	}{{c.AuthToken, &s.token, "authToken"}, {c.Password, &s.password, "password"}, {c.DeviceToken, &s.deviceToken, "deviceToken"}} {
		v, err := f.v.Resolve(ctx, a.host, companyID, Key)
		if err != nil {
			return nil, fmt.Errorf("theta_gateway could not resolve %s: %w", f.name, err)
		}
		*f.dst = v
	}
	if c.DisableDeviceAuth {
		return s, nil
	}
	if c.DeviceKey.IsSet() {
		pemText, err := c.DeviceKey.Resolve(ctx, a.host, companyID, Key)
		if err != nil {
			return nil, fmt.Errorf("theta_gateway could not resolve devicePrivateKeyPem: %w", err)
		}
		if s.device, err = parsePrivateKey(pemText); err != nil {
			return nil, fmt.Errorf("theta_gateway: %w", err)
		}
		return s, nil
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("error generating an ephemeral device key: %w", err)
	}
	s.device = priv
	return s, nil
}

// run is one execute call.
type run struct {
	a   *Adapter
	c   *Config
	req *adapter.ExecuteRequest
	ev  *procrun.Emitter
	sec *secrets
	red *gateway.Redactor

	// evMu orders event handling with the replay of events that came before acceptance.
	evMu sync.Mutex
	// early are the agent events that came before the agent request's answer named the
	// gateway's run id.
	early    []*frame
	accepted bool

	mu             sync.Mutex
	acceptedRunID  string
	deltas         strings.Builder
	openLine       bool
	lifecycleError string
}

// logf writes a system line to the run log, credentials redacted.
func (r *run) logf(format string, args ...any) {
	r.endOutputLine()
	r.ev.LogText("system", r.red.Redact(fmt.Sprintf(format, args...))+"\n")
}

// endOutputLine ends the streamed output's line before a log line follows it.
func (r *run) endOutputLine() {
	r.mu.Lock()
	open := r.openLine
	r.openLine = false
	r.mu.Unlock()
	if open {
		r.ev.LogText("stdout", "\n")
	}
}

// platform is the client platform reported and signed (Node's names).
func platform() string {
	if runtime.GOOS == "windows" {
		return "win32"
	}
	return runtime.GOOS
}

// deviceIdentity is the connect request's signed device block: id = sha256 hex of the
// raw public key, publicKey = base64url raw key, signature = base64url Ed25519 signature
// of v3|deviceId|clientId|clientMode|role|scopes|signedAtMs|token|nonce|platform|deviceFamily.
func deviceIdentity(priv ed25519.PrivateKey, c *Config, clientMode string, scopes []string, token, nonce string) map[string]any {
	pub := priv.Public().(ed25519.PublicKey)
	sum := sha256.Sum256(pub)
	id := hex.EncodeToString(sum[:])
	signedAt := time.Now().UnixMilli()
	payload := strings.Join([]string{"v3", id, c.ClientID, clientMode, c.Role, strings.Join(scopes, ","),
		fmt.Sprint(signedAt), token, nonce, platform(), c.DeviceFamily}, "|")
	return map[string]any{"id": id, "publicKey": base64.RawURLEncoding.EncodeToString(pub),
		"signature": base64.RawURLEncoding.EncodeToString(ed25519.Sign(priv, []byte(payload))), "signedAt": signedAt, "nonce": nonce}
}

// deviceID is the device id of the run's key ("" without device auth).
func (r *run) deviceID() string {
	if r.sec.device == nil {
		return ""
	}
	sum := sha256.Sum256(r.sec.device.Public().(ed25519.PublicKey))
	return hex.EncodeToString(sum[:])
}

// connect opens a connection, waits for the challenge and sends the connect request.
// withDevice signs it with the device key; scopes are the scopes asked for.
func (r *run) connect(ctx context.Context, scopes []string, withDevice bool, onEvent func(*frame)) (*wsClient, error) {
	c := r.c
	challenge := make(chan string, 1)
	cl, err := dialGateway(ctx, c.URL, c.handshakeHeaders(r.sec.token), c.ConnectTimeout, func(f *frame) {
		if f.Event == "connect.challenge" {
			var p struct {
				Nonce string `json:"nonce"`
			}
			_ = json.Unmarshal(f.Payload, &p)
			select {
			case challenge <- p.Nonce:
			default:
			}
			return
		}
		if onEvent != nil {
			onEvent(f)
		}
	})
	if err != nil {
		return nil, err
	}
	var nonce string
	t := time.NewTimer(c.ConnectTimeout)
	defer t.Stop()
	select {
	case nonce = <-challenge:
	case <-t.C:
		cl.close("no challenge")
		return nil, &timeoutError{method: "connect.challenge", after: c.ConnectTimeout}
	case <-cl.closed:
		return nil, cl.connErr()
	case <-ctx.Done():
		cl.close("cancelled")
		return nil, ctx.Err()
	}
	client := map[string]any{"id": c.ClientID, "version": c.ClientVersion, "platform": platform(), "mode": c.ClientMode}
	if c.DeviceFamily != "" {
		client["deviceFamily"] = c.DeviceFamily
	}
	params := map[string]any{"minProtocol": protocolVersion, "maxProtocol": protocolVersion, "client": client,
		"role": c.Role, "scopes": scopes}
	auth := map[string]any{}
	if r.sec.token != "" {
		auth["token"] = r.sec.token
	}
	if r.sec.deviceToken != "" {
		auth["deviceToken"] = r.sec.deviceToken
	}
	if r.sec.password != "" {
		auth["password"] = r.sec.password
	}
	if len(auth) > 0 {
		params["auth"] = auth
	}
	if withDevice && r.sec.device != nil {
		signToken := r.sec.token
		if signToken == "" {
			signToken = r.sec.deviceToken
		}
		params["device"] = deviceIdentity(r.sec.device, c, c.ClientMode, scopes, signToken, nonce)
	}
	if _, err := cl.request(ctx, "connect", params, c.ConnectTimeout); err != nil {
		cl.close("connect failed")
		return nil, err
	}
	return cl, nil
}

// autoPair approves this device's pending pairing request once, over a connection of its
// own with the pairing scope: the request id named in the refusal, else the pending
// request of this device (else the last one) from device.pair.list.
func (r *run) autoPair(ctx context.Context, refusal error) error {
	r.logf("[service] the gateway requires pairing; approving this device (autoPairOnFirstConnect)")
	requestID := pairingRequestID(refusal)
	scopes := append(append([]string(nil), r.c.Scopes...), pairingScope)
	cl, err := r.connect(ctx, scopes, false, nil)
	if err != nil {
		return fmt.Errorf("error connecting to approve the pairing: %w", err)
	}
	defer cl.close("service-pairing")
	if requestID == "" {
		raw, err := cl.request(ctx, "device.pair.list", map[string]any{}, r.c.ConnectTimeout)
		if err != nil {
			return fmt.Errorf("error listing pairing requests: %w", err)
		}
		var list struct {
			Pending []struct {
				RequestID string `json:"requestId"`
				DeviceID  string `json:"deviceId"`
			} `json:"pending"`
		}
		_ = json.Unmarshal(raw, &list)
		for _, p := range list.Pending {
			requestID = p.RequestID
			if p.DeviceID == r.deviceID() {
				break
			}
		}
		if requestID == "" {
			return errors.New("no pending pairing request to approve")
		}
	}
	if _, err := cl.request(ctx, "device.pair.approve", map[string]any{"requestId": requestID}, r.c.ConnectTimeout); err != nil {
		return fmt.Errorf("error approving pairing request %s: %w", requestID, err)
	}
	r.logf("[service] pairing request %s approved", requestID)
	return nil
}

// pairingRequestID is the request id a pairing refusal names, if any.
func pairingRequestID(err error) string {
	var ge *gatewayError
	if !errors.As(err, &ge) {
		return ""
	}
	var d struct {
		RequestID string `json:"requestId"`
	}
	if json.Unmarshal(ge.Details, &d) == nil && d.RequestID != "" {
		return d.RequestID
	}
	if _, after, ok := strings.Cut(ge.Message, "requestId="); ok {
		return strings.Fields(after + " ")[0]
	}
	return ""
}

func isPairingRequired(err error) bool {
	return err != nil && strings.Contains(strings.ToLower(err.Error()), "pairing required")
}

// sessionKey is the run's session key; a saved session of the same strategy (not run) is
// resumed.
func (r *run) sessionKey(issueID string) (string, bool) {
	if rt := r.req.Runtime; rt != nil && len(rt.SessionParams) > 0 && r.c.SessionStrategy != "run" {
		var p struct {
			SessionKey string `json:"sessionKey"`
			Strategy   string `json:"strategy"`
		}
		if json.Unmarshal(rt.SessionParams, &p) == nil && p.Strategy == r.c.SessionStrategy && p.SessionKey != "" {
			return p.SessionKey, true
		}
	}
	return r.c.sessionKeyFor(r.req.RunID, issueID), false
}

// message is the agent request's message: the template's message or text, then the wake
// text.
func (r *run) message() string {
	wake := gateway.WakeText(r.req.AgentName, r.req.Env, r.c.ServiceAPIURL, r.c.ClaimedAPIKeyPath, r.req.Context)
	for _, k := range []string{"message", "text"} {
		if s, _ := r.c.PayloadTemplate[k].(string); strings.TrimSpace(s) != "" {
			return s + "\n\n" + wake
		}
	}
	return wake
}

// onAgentEvent handles the gateway's events of our run: assistant deltas go to stdout and
// the summary, error streams and failed lifecycles are remembered, the rest is logged.
func (r *run) onAgentEvent(f *frame) {
	r.evMu.Lock()
	defer r.evMu.Unlock()
	r.handleEvent(f)
}

// setAccepted records the gateway's run id from the agent request's answer and handles
// the events that came before it.
func (r *run) setAccepted(runID string) {
	r.evMu.Lock()
	defer r.evMu.Unlock()
	r.mu.Lock()
	r.acceptedRunID = runID
	r.mu.Unlock()
	r.accepted = true
	early := r.early
	r.early = nil
	for _, f := range early {
		r.handleEvent(f)
	}
}

// handleEvent handles one event under evMu.
func (r *run) handleEvent(f *frame) {
	if f.Event == "shutdown" {
		r.logf("[openclaw-gateway:event] shutdown %s", f.Payload)
		return
	}
	if f.Event != "agent" {
		return
	}
	var p struct {
		RunID  string         `json:"runId"`
		Stream string         `json:"stream"`
		Data   map[string]any `json:"data"`
	}
	if json.Unmarshal(f.Payload, &p) != nil {
		return
	}
	if !r.accepted {
		// Kept in order until the answer names the gateway's run id.
		if len(r.early) < maxEarlyEvents {
			r.early = append(r.early, f)
		}
		return
	}
	r.mu.Lock()
	ours := p.RunID == r.req.RunID || (p.RunID != "" && p.RunID == r.acceptedRunID)
	r.mu.Unlock()
	if !ours {
		return
	}
	switch p.Stream {
	case "assistant":
		delta := str(p.Data["delta"])
		if delta == "" {
			delta = str(p.Data["text"])
		}
		if delta != "" {
			r.mu.Lock()
			r.deltas.WriteString(delta)
			r.openLine = !strings.HasSuffix(delta, "\n")
			r.mu.Unlock()
			r.ev.LogText("stdout", r.red.Redact(delta))
		}
		return
	case "error":
		msg := str(p.Data["error"])
		if msg == "" {
			msg = str(p.Data["message"])
		}
		r.mu.Lock()
		r.lifecycleError = msg
		r.mu.Unlock()
	case "lifecycle":
		switch phase := str(p.Data["phase"]); phase {
		case "error", "failed", "cancelled":
			msg := str(p.Data["error"])
			if msg == "" {
				msg = "agent run " + phase
			}
			r.mu.Lock()
			r.lifecycleError = msg
			r.mu.Unlock()
		}
	}
	b, _ := json.Marshal(p.Data)
	r.logf("[openclaw-gateway:event] run=%s stream=%s data=%s", p.RunID, p.Stream, b)
}

func (r *run) execute(ctx context.Context) *adapter.ExecuteResult {
	c := r.c
	if len(c.Ignored) > 0 {
		r.logf("[service] ignored config keys (WebSocket only): %s", strings.Join(c.Ignored, ", "))
	}
	if c.PlainRemote {
		r.logf("[service] warning: plain ws:// to a non-loopback gateway; use wss://")
	}
	issueID, _ := r.req.Context["issueId"].(string)
	if issueID == "" {
		issueID = r.req.Env["SERVICE_TASK_ID"]
	}
	sessionKey, resumed := r.sessionKey(issueID)
	if resumed {
		r.logf("[service] resuming session %s", sessionKey)
	}
	device := "device auth off"
	if r.sec.device != nil {
		device = "device " + r.deviceID()[:16]
	}
	r.logf("[service] connecting to %s (%s, session key strategy %s)", c.URL, device, c.SessionStrategy)

	var cl *wsClient
	paired := false
	for attempt := 0; ; attempt++ {
		var err error
		cl, err = r.connect(ctx, c.Scopes, true, r.onAgentEvent)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return r.cancelled()
		}
		r.logf("[service] connect failed: %v", err)
		canPair := !c.DisableDeviceAuth && c.AutoPair && (r.sec.token != "" || r.sec.password != "")
		if isPairingRequired(err) && canPair && !paired {
			paired = true
			if perr := r.autoPair(ctx, err); perr != nil {
				r.logf("[service] auto-pairing failed: %v", perr)
				return r.failure(err)
			}
			continue
		}
		if transient(err) && attempt < maxRetries {
			wait := retryBase << attempt
			r.logf("[service] retrying in %s", wait)
			select {
			case <-ctx.Done():
				return r.cancelled()
			case <-time.After(wait):
			}
			continue
		}
		return r.failure(err)
	}
	defer cl.close("service-complete")

	params := make(map[string]any, len(c.PayloadTemplate)+5)
	for k, v := range c.PayloadTemplate {
		params[k] = v
	}
	delete(params, "text")
	delete(params, "service")
	delete(params, "keel")
	params["message"], params["sessionKey"], params["idempotencyKey"] = r.message(), sessionKey, r.req.RunID
	if _, set := params["agentId"]; !set && c.AgentID != "" {
		params["agentId"] = c.AgentID
	}
	if _, numeric := params["timeout"].(float64); !numeric {
		params["timeout"] = c.WaitTimeout.Milliseconds()
	}
	r.logf("[service] dispatching agent request (session %s)", sessionKey)
	raw, err := cl.request(ctx, "agent", params, c.ConnectTimeout)
	if err != nil {
		if ctx.Err() != nil {
			return r.cancelled()
		}
		return r.failure(err)
	}
	accepted := decodeObject(raw)
	r.setAccepted(str(accepted["runId"]))
	latest := accepted
	switch status := str(accepted["status"]); status {
	case "error":
		msg := str(accepted["summary"])
		if msg == "" {
			msg = "the gateway's agent run failed"
		}
		r.logf("[service] agent request failed: %s", msg)
		return r.withSession(failed("openclaw_gateway_agent_error", r.red.Redact(msg)), sessionKey, accepted)
	case "ok":
	default:
		waitID := str(accepted["runId"])
		if waitID == "" {
			waitID = r.req.RunID
		}
		r.logf("[service] agent run %s %s; waiting (agent.wait, %s)", waitID, orDefault(status, "accepted"), c.WaitTimeout)
		raw, err := cl.request(ctx, "agent.wait", map[string]any{"runId": waitID, "timeoutMs": c.WaitTimeout.Milliseconds()},
			c.WaitTimeout+c.ConnectTimeout)
		if err != nil {
			if ctx.Err() != nil {
				return r.cancelled()
			}
			return r.withSession(r.failure(err), sessionKey, accepted)
		}
		waited := decodeObject(raw)
		latest = waited
		switch ws := str(waited["status"]); ws {
		case "ok":
		case "timeout":
			r.logf("[service] agent.wait timed out")
			res := r.withSession(failed("openclaw_gateway_wait_timeout", fmt.Sprintf("The gateway's agent run did not finish within %s", c.WaitTimeout)), sessionKey, waited)
			res.Status, res.TimedOut = adapter.StatusTimedOut, true
			return res
		case "error":
			msg := firstText(waited, "error", "summary", "message")
			if msg == "" {
				msg = "the gateway's agent run failed"
			}
			return r.withSession(failed("openclaw_gateway_wait_error", r.red.Redact(msg)), sessionKey, waited)
		default:
			return r.withSession(failed("openclaw_gateway_wait_status_unexpected", fmt.Sprintf("agent.wait answered status %q", ws)), sessionKey, waited)
		}
	}
	r.mu.Lock()
	lifecycleErr := r.lifecycleError
	r.mu.Unlock()
	if lifecycleErr != "" {
		return r.withSession(failed("openclaw_gateway_agent_error", r.red.Redact(lifecycleErr)), sessionKey, latest)
	}
	return r.success(sessionKey, accepted, latest)
}

// success reports a finished agent run: summary, usage, provider, model and cost from the
// payloads' meta.agentMeta, the session key, and the latest payload as resultJson.
func (r *run) success(sessionKey string, accepted, latest map[string]any) *adapter.ExecuteResult {
	zero := 0
	res := r.withSession(&adapter.ExecuteResult{Status: adapter.StatusSucceeded, ExitCode: &zero, Provider: defaultProvider}, sessionKey, latest)
	r.mu.Lock()
	summary := r.deltas.String()
	r.mu.Unlock()
	if strings.TrimSpace(summary) == "" {
		summary = payloadText(latest)
		if summary == "" {
			summary = payloadText(accepted)
		}
	}
	res.Summary = r.red.Redact(strings.TrimSpace(summary))
	meta := metaOf(latest)
	if meta == nil {
		meta = metaOf(accepted)
	}
	if am, ok := meta["agentMeta"].(map[string]any); ok {
		u, ok := am["usage"].(map[string]any)
		if !ok {
			u = am
		}
		if hasAny(u, "inputTokens", "input", "outputTokens", "output") {
			res.Usage = &adapter.Usage{InputTokens: num(u, "inputTokens", "input"), OutputTokens: num(u, "outputTokens", "output"),
				CachedInputTokens: num(u, "cachedInputTokens", "cached_input_tokens", "cacheRead", "cache_read")}
		}
		if p := str(am["provider"]); p != "" {
			res.Provider = p
		}
		res.Model = str(am["model"])
		for _, src := range []map[string]any{am, meta} {
			if f, ok := src["costUsd"].(float64); ok && f >= 0 && res.CostUSD == nil {
				res.CostUSD = &f
			}
		}
	}
	r.logf("[service] agent run finished")
	return res
}

// withSession adds the session key, the session params and resultJson to a result.
func (r *run) withSession(res *adapter.ExecuteResult, sessionKey string, payload map[string]any) *adapter.ExecuteResult {
	res.SessionID = sessionKey
	res.SessionParams, _ = json.Marshal(map[string]any{"sessionKey": sessionKey, "strategy": r.c.SessionStrategy})
	if payload != nil {
		if b, err := json.Marshal(payload); err == nil {
			res.ResultJSON = json.RawMessage(r.red.Redact(string(b)))
		}
	}
	return res
}

// failure classifies a failed request: timeouts, pairing refusals and other failures.
func (r *run) failure(err error) *adapter.ExecuteResult {
	msg := r.red.Redact(err.Error())
	var te *timeoutError
	switch {
	case errors.As(err, &te) || strings.Contains(strings.ToLower(msg), "timeout"):
		res := failed("openclaw_gateway_timeout", "Gateway "+msg)
		if te != nil && te.method == "agent.wait" {
			res.Status, res.TimedOut = adapter.StatusTimedOut, true
		}
		return res
	case isPairingRequired(err):
		return failed("openclaw_gateway_pairing_required", "Gateway pairing required: "+msg+
			". Approve this device on the gateway (device.pair.approve), or set a token or password so keel can approve it (autoPairOnFirstConnect).")
	}
	return failed("openclaw_gateway_request_failed", "Gateway request failed: "+msg)
}

func (r *run) cancelled() *adapter.ExecuteResult {
	r.logf("[service] run cancelled")
	return &adapter.ExecuteResult{Status: adapter.StatusCancelled, ErrorCode: "cancelled", ErrorMessage: "Run cancelled"}
}

func failed(code, msg string) *adapter.ExecuteResult {
	one := 1
	return &adapter.ExecuteResult{Status: adapter.StatusFailed, ExitCode: &one, ErrorCode: code, ErrorMessage: msg}
}

// metaOf is a payload's result.meta, else its meta.
func metaOf(p map[string]any) map[string]any {
	if res, ok := p["result"].(map[string]any); ok {
		if m, ok := res["meta"].(map[string]any); ok {
			return m
		}
	}
	m, _ := p["meta"].(map[string]any)
	return m
}

// payloadText is a payload's text: result.payloads[].text joined, else text, else summary.
func payloadText(p map[string]any) string {
	if res, ok := p["result"].(map[string]any); ok {
		if list, ok := res["payloads"].([]any); ok {
			var parts []string
			for _, it := range list {
				if m, ok := it.(map[string]any); ok && str(m["text"]) != "" {
					parts = append(parts, str(m["text"]))
				}
			}
			if len(parts) > 0 {
				return strings.Join(parts, "\n\n")
			}
		}
	}
	return firstText(p, "text", "summary")
}

func firstText(p map[string]any, keys ...string) string {
	for _, k := range keys {
		switch v := p[k].(type) {
		case string:
			if v != "" {
				return v
			}
		case map[string]any:
			if s := str(v["message"]); s != "" {
				return s
			}
		}
	}
	return ""
}

func hasAny(m map[string]any, keys ...string) bool {
	for _, k := range keys {
		if _, ok := m[k].(float64); ok {
			return true
		}
	}
	return false
}

func num(m map[string]any, keys ...string) int64 {
	for _, k := range keys {
		if f, ok := m[k].(float64); ok && f >= 0 {
			return int64(f)
		}
	}
	return 0
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func decodeObject(b []byte) map[string]any {
	m := map[string]any{}
	_ = json.Unmarshal(b, &m)
	if m == nil {
		m = map[string]any{}
	}
	return m
}
