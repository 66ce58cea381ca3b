// Command kitchen is an example plugin that declares everything a plugin can offer
// besides routes: agent tools, inbound webhooks, jobs, UI slots and launchers with their
// files under ui/, data and actions for its UI, a stream channel and a per-company local
// folder. It registers its handlers on an sdk.Features registry.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	_ "embed"

	"github.com/keelhq/keel/sdk"
)

//go:embed manifest.json
var manifestJSON []byte

// Kitchen is the extension. The embedded Features registry answers tools, webhooks, data
// and actions.
type Kitchen struct {
	sdk.Features
	manifest *sdk.Manifest
	host     *sdk.Host

	mu          sync.Mutex
	lastWebhook *sdk.WebhookDelivery
	lastFolder  *sdk.LocalFolderPath
	pings       int
}

func newKitchen() *Kitchen {
	m, err := sdk.ParseManifest(manifestJSON)
	if err != nil {
		panic(err)
	}
	k := &Kitchen{manifest: m}
	k.Tool("echo", k.echo)
	k.Tool("whoami", k.whoami)
	k.Tool("read_readme", k.readReadme)
	k.Webhook("inbound", k.inbound)
	k.Webhook("broken", func(ctx context.Context, d *sdk.WebhookDelivery) (any, error) {
		sdk.LoggerFrom(ctx).Error("broken webhook refused a delivery", "deliveryId", d.DeliveryID)
		return nil, errors.New("this endpoint always fails")
	})
	k.Data("last-webhook", k.lastWebhookData)
	k.Data("folder", k.folderData)
	k.Action("ping", k.ping)
	return k
}

// Manifest returns the embedded manifest.
func (k *Kitchen) Manifest() *sdk.Manifest { return k.manifest }

// Configure keeps the host services (EmitStream needs them).
func (k *Kitchen) Configure(_ context.Context, env *sdk.Env) error {
	k.host = env.Host
	return nil
}

func (k *Kitchen) echo(_ context.Context, c *sdk.ToolCall) (*sdk.ToolResult, error) {
	var p struct {
		Text  string `json:"text"`
		Times int    `json:"times"`
	}
	if err := c.Bind(&p); err != nil {
		return nil, err
	}
	if p.Times == 0 {
		p.Times = 1
	}
	return &sdk.ToolResult{Content: strings.TrimSpace(strings.Repeat(p.Text+" ", p.Times)), Data: map[string]any{"times": p.Times}}, nil
}

func (k *Kitchen) whoami(_ context.Context, c *sdk.ToolCall) (*sdk.ToolResult, error) {
	return &sdk.ToolResult{Content: "you are " + c.Actor.Type, Data: map[string]any{
		"actorType": c.Actor.Type, "agentId": c.Actor.AgentId, "userId": c.Actor.UserId,
		"companyId": c.RunContext.CompanyID, "runId": c.RunContext.RunID,
	}}, nil
}

// readReadme reads through the path the host delivered with the call: keel checked it
// (absolute, no "..", no symlink out of it) when the company set it.
func (k *Kitchen) readReadme(_ context.Context, c *sdk.ToolCall) (*sdk.ToolResult, error) {
	f, ok := c.LocalFolders["notes"]
	if !ok {
		return &sdk.ToolResult{Error: "the notes folder is not set for this company"}, nil
	}
	if !f.Healthy {
		return &sdk.ToolResult{Error: "the notes folder is not healthy"}, nil
	}
	b, err := os.ReadFile(filepath.Join(f.Path, "README.md"))
	if err != nil {
		return nil, fmt.Errorf("error reading README.md: %w", err)
	}
	return &sdk.ToolResult{Content: string(b)}, nil
}

func (k *Kitchen) inbound(ctx context.Context, d *sdk.WebhookDelivery) (any, error) {
	k.mu.Lock()
	k.lastWebhook = d
	k.mu.Unlock()
	sdk.LoggerFrom(ctx).Info("webhook received", "endpoint", d.EndpointKey, "bytes", len(d.RawBody))
	return map[string]any{"received": len(d.RawBody)}, nil
}

func (k *Kitchen) lastWebhookData(context.Context, *sdk.DataRequest) (any, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.lastWebhook == nil {
		return nil, nil
	}
	sig := ""
	for name, v := range k.lastWebhook.Headers {
		if strings.EqualFold(name, "X-Signature") && len(v) > 0 {
			sig = v[0]
		}
	}
	return map[string]any{"body": string(k.lastWebhook.RawBody), "signature": sig, "deliveryId": k.lastWebhook.DeliveryID}, nil
}

func (k *Kitchen) folderData(_ context.Context, r *sdk.DataRequest) (any, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return map[string]any{"folders": r.LocalFolders, "lastChanged": k.lastFolder}, nil
}

// ping emits a message on the company's "pings" stream channel and answers pong.
func (k *Kitchen) ping(ctx context.Context, r *sdk.DataRequest) (any, error) {
	if r.CompanyID == "" {
		return nil, &sdk.Error{Status: 400, Message: "companyId is required"}
	}
	k.mu.Lock()
	k.pings++
	n := k.pings
	k.mu.Unlock()
	if err := k.host.EmitStream(ctx, "pings", r.CompanyID, map[string]any{"n": n, "by": r.Actor.Type}); err != nil {
		return nil, err
	}
	return map[string]any{"pong": n}, nil
}

// LocalFolderChanged keeps the folder a company just set.
func (k *Kitchen) LocalFolderChanged(_ context.Context, f *sdk.LocalFolderPath) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.lastFolder = f
	return nil
}

// RunJob runs the declared jobs.
func (k *Kitchen) RunJob(ctx context.Context, job *sdk.JobRun) error {
	switch job.Key {
	case "tick":
		sdk.LoggerFrom(ctx).Info("tick ran", "attempt", job.Attempt)
		return nil
	case "fail":
		return errors.New("the fail job always fails")
	}
	return fmt.Errorf("unknown job %s", job.Key)
}

func main() { sdk.Serve(newKitchen()) }

var (
	_ sdk.Configurer          = (*Kitchen)(nil)
	_ sdk.ToolExecutor        = (*Kitchen)(nil)
	_ sdk.WebhookHandler      = (*Kitchen)(nil)
	_ sdk.DataProvider        = (*Kitchen)(nil)
	_ sdk.ActionPerformer     = (*Kitchen)(nil)
	_ sdk.LocalFolderListener = (*Kitchen)(nil)
	_ sdk.JobRunner           = (*Kitchen)(nil)
)
