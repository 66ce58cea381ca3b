package kernel

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/keelhq/keel/sdk"
)

// PluginLogLine is one line an extension wrote to its log (stderr), newest last.
type PluginLogLine struct {
	Time    time.Time      `json:"time"`
	Level   string         `json:"level"`
	Message string         `json:"message"`
	Fields  map[string]any `json:"fields,omitempty"`
}

// PluginRuntime is what the plugin feature routes need of the host: reserved calls into a
// running extension, its recent log lines, a job trigger and the UI stream hub. The host
// sets it with SetPluginRuntime; without one the routes answer 503.
type PluginRuntime interface {
	// PluginCall sends a reserved method (sdk.ToolMethod, sdk.WebhookMethod …) to the
	// extension as the actor, starting a lazy extension first. An *APIError says the
	// extension is down (503), timed out (504) or failed (502), or carries the status the
	// extension answered with.
	PluginCall(ctx context.Context, key, method string, actor *Actor, companyID string, input any) (json.RawMessage, error)
	// PluginLogs returns the extension's most recent log lines on this node, oldest first:
	// the last limit of them, or all that are kept when limit is 0.
	PluginLogs(key string, limit int) []PluginLogLine
	// PluginTriggerJob queues a run of a declared job now and returns the queue's job id.
	PluginTriggerJob(ctx context.Context, key, jobKey string) (int64, error)
	// PluginSubscribe listens to a stream channel of an extension in a company; cancel
	// stops it. Messages are JSON values.
	PluginSubscribe(key, channel, companyID string) (messages <-chan json.RawMessage, cancel func())
}

// SetPluginRuntime sets the host side of the plugin feature routes.
func (k *Kernel) SetPluginRuntime(r PluginRuntime) { k.pluginRuntime = r }

// runtime returns the plugin runtime, or the 503 of a host that has none.
func (k *Kernel) runtime() (PluginRuntime, error) {
	if k.pluginRuntime == nil {
		return nil, NewAPIError(http.StatusServiceUnavailable, "Plugin runtime is not available on this host")
	}
	return k.pluginRuntime, nil
}

// installedPlugin is a registry row with its parsed manifest.
type installedPlugin struct {
	rec *ExtensionRecord
	mf  *sdk.Manifest
}

// enabled reports whether the plugin is enabled and not held disabled.
func (p *installedPlugin) enabled() bool {
	return p.rec.Enabled && p.rec.Status != ExtensionDisabled
}

// ready reports whether the plugin can take reserved calls now.
func (p *installedPlugin) ready() bool {
	return p.enabled() && (p.rec.Status == ExtensionReady || p.rec.Status == ExtensionUpgradePending)
}

// unavailable is the 503 of a call to a plugin that is not ready.
func (p *installedPlugin) unavailable() *APIError {
	return NewAPIError(http.StatusServiceUnavailable, "Plugin is not ready (current status: "+p.rec.Status+")").WithCode("plugin_not_ready")
}

func (p *installedPlugin) notReady() *APIError {
	return BadRequest("Plugin is not ready (current status: " + p.rec.Status + ")").WithCode("plugin_not_ready")
}

// decodeManifest reads a registry row's manifest leniently: it was strictly checked when the
// extension was loaded, and a newer manifest field must not hide the plugin here.
func decodeManifest(rec *ExtensionRecord) *sdk.Manifest {
	var mf sdk.Manifest
	_ = json.Unmarshal(rec.Manifest, &mf)
	if mf.Key == "" {
		mf.Key = rec.PluginKey
	}
	return &mf
}

// pluginByID reads one plugin by key or id: 404 "Plugin not found" when there is none.
func (k *Kernel) pluginByID(ctx context.Context, keyOrID string) (*installedPlugin, error) {
	rec, err := k.ExtensionGet(ctx, keyOrID)
	if err != nil {
		return nil, Internal(err)
	}
	if rec == nil {
		return nil, NotFound("Plugin not found")
	}
	return &installedPlugin{rec: rec, mf: decodeManifest(rec)}, nil
}

// pluginsAll reads every registry row with its manifest.
func (k *Kernel) pluginsAll(ctx context.Context) ([]*installedPlugin, error) {
	recs, err := k.ExtensionList(ctx)
	if err != nil {
		return nil, Internal(err)
	}
	out := make([]*installedPlugin, 0, len(recs))
	for _, r := range recs {
		out = append(out, &installedPlugin{rec: r, mf: decodeManifest(r)})
	}
	return out, nil
}

// pluginCall sends a reserved call and decodes its output into out (when non-nil).
func (k *Kernel) pluginCall(ctx context.Context, p *installedPlugin, method string, companyID string, input, out any) error {
	rt, err := k.runtime()
	if err != nil {
		return err
	}
	raw, err := rt.PluginCall(ctx, p.rec.PluginKey, method, ActorFrom(ctx), companyID, input)
	if err != nil {
		return err
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return (&APIError{Status: http.StatusBadGateway, Message: "Plugin " + p.rec.PluginKey + " answered with undecodable output", Internal: err}).WithCode("plugin_bad_output")
		}
	}
	return nil
}

// PluginHistoryRetention is how long webhook deliveries and job runs are kept.
const PluginHistoryRetention = 30 * 24 * time.Hour

// sweepPluginHistory deletes webhook deliveries and job runs older than the retention, at
// most once an hour per node; it runs when new history is written.
func (k *Kernel) sweepPluginHistory(ctx context.Context) {
	now := time.Now().UnixNano()
	last := k.pluginSweep.Load()
	if now-last < int64(time.Hour) || !k.pluginSweep.CompareAndSwap(last, now) {
		return
	}
	cutoff := time.Now().Add(-PluginHistoryRetention)
	for _, table := range []string{"kernel.plugin_webhook_deliveries", "kernel.plugin_job_runs"} {
		if _, err := k.Pool.Exec(ctx, `DELETE FROM `+table+` WHERE created_at < $1`, cutoff); err != nil {
			k.log.Warn("error deleting old plugin history", "table", table, "error", err)
		}
	}
}

func (k *Kernel) pluginFeatureRoutes() []*Route {
	routes := []*Route{
		Mount[toolListRequest, []*ToolDescriptor](&toolListEndpoint{k}),
		Mount[toolExecuteRequest, ToolExecuteResult](&toolExecuteEndpoint{k}),
		Mount[webhookRequest, webhookResponse](&webhookEndpoint{k}),
		Mount[pluginRequest, []*PluginJob](&pluginJobsEndpoint{k}),
		Mount[jobRunsRequest, []*PluginJobRun](&pluginJobRunsEndpoint{k}),
		Mount[jobRequest, JobTriggerResult](&pluginJobTriggerEndpoint{k}),
		Mount[logsRequest, []PluginLogLine](&pluginLogsEndpoint{k}),
		Mount[struct{}, []*UIContribution](&uiContributionsEndpoint{k}),
		Mount[pluginRequest, PluginDashboard](&pluginDashboardEndpoint{k}),
		Mount[bridgeRequest, BridgeResult](&bridgeDataEndpoint{k}),
		Mount[bridgeRequest, BridgeResult](&bridgeActionEndpoint{k}),
		Mount[bridgeKeyRequest, BridgeResult](&dataByKeyEndpoint{k}),
		Mount[bridgeKeyRequest, BridgeResult](&actionByKeyEndpoint{k}),
		Mount[streamRequest, streamResponse](&bridgeStreamEndpoint{k}),
		Mount[folderCompanyRequest, LocalFolderList](&folderListEndpoint{k}),
		Mount[folderRequest, LocalFolderStatus](&folderStatusEndpoint{k}),
		Mount[folderPathRequest, LocalFolderStatus](&folderValidateEndpoint{k}),
		Mount[folderPathRequest, LocalFolderStatus](&folderPutEndpoint{k}),
	}
	return append(routes, k.uiAssetRoutes()...)
}
