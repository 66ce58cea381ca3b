package thetagateway_test

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/coder/websocket"
)

// gatewayServer is an in-test agent gateway speaking the WebSocket protocol of
// REFERENCE-adapters.md 7. The path /s/<scenario> picks the behaviour:
//
//	ok              accepted, deltas as agent events, agent.wait ok with meta.agentMeta usage
//	flaky           the first connection is dropped before the challenge; later ones are ok
//	pair            an unpaired device is refused "pairing required" until approved
//	badauth         connect is refused (token mismatch)
//	agenterror      the agent request answers status error
//	lifecycle-error the run's lifecycle event reports an error; agent.wait is ok
//	waittimeout     agent.wait answers status timeout
//	waiterror       agent.wait answers status error
//	slow            agent.wait is never answered
type gatewayServer struct {
	*httptest.Server
	token string

	mu    sync.Mutex
	conns map[string]int
	// runs are the agent requests seen, by idempotency key.
	runs map[string]*seenRun
	// paired are the approved device ids; pending the pairing requests.
	paired  map[string]bool
	pending []map[string]any
	n       int
}

// seenRun is what the gateway saw of one run.
type seenRun struct {
	Auth          string
	Connect       map[string]any
	DeviceID      string
	SignatureOK   bool
	Params        map[string]any
	Waited        bool
	ConnectsTotal int
}

func newGatewayServer(t *testing.T) *gatewayServer {
	g := &gatewayServer{token: "gw-token", conns: map[string]int{}, runs: map[string]*seenRun{}, paired: map[string]bool{}}
	g.Server = httptest.NewServer(http.HandlerFunc(g.serve))
	t.Cleanup(g.Close)
	return g
}

func (g *gatewayServer) url(scenario string) string {
	return "ws" + strings.TrimPrefix(g.URL, "http") + "/s/" + scenario
}

func (g *gatewayServer) run(runID string) seenRun {
	g.mu.Lock()
	defer g.mu.Unlock()
	if r := g.runs[runID]; r != nil {
		return *r
	}
	return seenRun{}
}

func (g *gatewayServer) serve(w http.ResponseWriter, r *http.Request) {
	scenario := strings.TrimPrefix(r.URL.Path, "/s/")
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer conn.CloseNow()
	g.mu.Lock()
	g.conns[scenario]++
	first := g.conns[scenario] == 1
	g.mu.Unlock()
	if scenario == "flaky" && first {
		return // dropped before the challenge
	}
	ctx := r.Context()
	send := func(v any) {
		b, _ := json.Marshal(v)
		_ = conn.Write(ctx, websocket.MessageText, b)
	}
	nonce := fmt.Sprintf("nonce-%p", conn)
	send(map[string]any{"type": "event", "event": "connect.challenge", "payload": map[string]any{"nonce": nonce, "ts": 1}})
	res := func(id string, payload any) {
		send(map[string]any{"type": "res", "id": id, "ok": true, "payload": payload})
	}
	fail := func(id, code, msg string, details any) {
		send(map[string]any{"type": "res", "id": id, "ok": false, "error": map[string]any{"code": code, "message": msg, "details": details}})
	}
	var connect map[string]any
	var deviceID string
	var sigOK bool
	auth := r.Header.Get("Authorization")
	for {
		_, b, err := conn.Read(ctx)
		if err != nil {
			return
		}
		var f struct {
			ID     string         `json:"id"`
			Method string         `json:"method"`
			Params map[string]any `json:"params"`
		}
		if json.Unmarshal(b, &f) != nil {
			continue
		}
		switch f.Method {
		case "connect":
			connect = f.Params
			a, _ := f.Params["auth"].(map[string]any)
			if a["token"] != g.token || scenario == "badauth" {
				fail(f.ID, "UNAUTHORIZED", "unauthorized: gateway token mismatch", nil)
				continue
			}
			if d, ok := f.Params["device"].(map[string]any); ok {
				deviceID, sigOK = verifyDevice(f.Params, d, nonce)
				if !sigOK {
					fail(f.ID, "INVALID_REQUEST", "device signature invalid", nil)
					continue
				}
				g.mu.Lock()
				paired := g.paired[deviceID]
				if scenario == "pair" && !paired {
					g.n++
					g.pending = append(g.pending, map[string]any{"requestId": fmt.Sprintf("pr-%d", g.n), "deviceId": deviceID})
					g.mu.Unlock()
					fail(f.ID, "NOT_PAIRED", "pairing required", nil)
					continue
				}
				g.mu.Unlock()
			}
			res(f.ID, map[string]any{"type": "hello-ok", "protocol": 4})
		case "device.pair.list":
			g.mu.Lock()
			list := append([]map[string]any(nil), g.pending...)
			g.mu.Unlock()
			res(f.ID, map[string]any{"pending": list})
		case "device.pair.approve":
			scopes, _ := connect["scopes"].([]any)
			if !containsAny(scopes, "operator.pairing") {
				fail(f.ID, "FORBIDDEN", "missing scope operator.pairing", nil)
				continue
			}
			g.mu.Lock()
			for i, p := range g.pending {
				if p["requestId"] == f.Params["requestId"] {
					g.paired[p["deviceId"].(string)] = true
					g.pending = append(g.pending[:i], g.pending[i+1:]...)
					break
				}
			}
			g.mu.Unlock()
			res(f.ID, map[string]any{"ok": true})
		case "agent":
			key, _ := f.Params["idempotencyKey"].(string)
			g.mu.Lock()
			g.n++
			gwRun := fmt.Sprintf("gw-%d", g.n)
			g.runs[key] = &seenRun{Auth: auth, Connect: connect, DeviceID: deviceID, SignatureOK: sigOK, Params: f.Params, ConnectsTotal: g.conns[scenario]}
			g.mu.Unlock()
			if scenario == "agenterror" {
				res(f.ID, map[string]any{"runId": gwRun, "status": "error", "summary": "agent refused the task"})
				continue
			}
			res(f.ID, map[string]any{"runId": gwRun, "status": "accepted", "acceptedAt": 1})
			event := func(runID, stream string, data any) {
				send(map[string]any{"type": "event", "event": "agent", "payload": map[string]any{"runId": runID, "stream": stream, "data": data}})
			}
			event(gwRun, "lifecycle", map[string]any{"phase": "start"})
			event(gwRun, "assistant", map[string]any{"delta": "Hello "})
			event(key, "assistant", map[string]any{"delta": "from the gateway."})
			event("someone-else", "assistant", map[string]any{"delta": "NOT OURS"})
			if scenario == "lifecycle-error" {
				event(gwRun, "lifecycle", map[string]any{"phase": "error", "error": "model crashed"})
			} else {
				event(gwRun, "lifecycle", map[string]any{"phase": "end"})
			}
		case "agent.wait":
			runID, _ := f.Params["runId"].(string)
			g.mu.Lock()
			for _, sr := range g.runs {
				if sr.Params != nil {
					sr.Waited = sr.Waited || runID != ""
				}
			}
			g.mu.Unlock()
			switch scenario {
			case "slow":
				continue
			case "waittimeout":
				res(f.ID, map[string]any{"runId": runID, "status": "timeout"})
			case "waiterror":
				res(f.ID, map[string]any{"runId": runID, "status": "error", "error": "agent crashed"})
			default:
				res(f.ID, map[string]any{"runId": runID, "status": "ok", "result": map[string]any{
					"payloads": []any{map[string]any{"text": "Done."}},
					"meta": map[string]any{"agentMeta": map[string]any{"provider": "anthropic", "model": "claude-sonnet-4",
						"usage": map[string]any{"input": 900, "output": 45, "cacheRead": 120}, "costUsd": 0.02}}}})
			}
		default:
			fail(f.ID, "UNKNOWN_METHOD", "unknown method "+f.Method, nil)
		}
	}
}

// verifyDevice checks a connect request's device block: the id is the sha256 of the public
// key and the signature covers the v3 payload with this connection's nonce.
func verifyDevice(params, d map[string]any, nonce string) (string, bool) {
	pub, err := base64.RawURLEncoding.DecodeString(fmt.Sprint(d["publicKey"]))
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return "", false
	}
	sum := sha256.Sum256(pub)
	id := hex.EncodeToString(sum[:])
	sig, err := base64.RawURLEncoding.DecodeString(fmt.Sprint(d["signature"]))
	if err != nil || d["id"] != id || d["nonce"] != nonce {
		return id, false
	}
	client, _ := params["client"].(map[string]any)
	auth, _ := params["auth"].(map[string]any)
	scopes, _ := params["scopes"].([]any)
	var ss []string
	for _, s := range scopes {
		ss = append(ss, fmt.Sprint(s))
	}
	token, _ := auth["token"].(string)
	family, _ := client["deviceFamily"].(string)
	payload := strings.Join([]string{"v3", id, fmt.Sprint(client["id"]), fmt.Sprint(client["mode"]), fmt.Sprint(params["role"]),
		strings.Join(ss, ","), fmt.Sprintf("%.0f", d["signedAt"]), token, nonce, fmt.Sprint(client["platform"]), family}, "|")
	return id, ed25519.Verify(pub, []byte(payload), sig)
}

func containsAny(list []any, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
