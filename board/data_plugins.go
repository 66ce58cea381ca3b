package board

import (
	"encoding/json"
	"time"
)

// plugin is an entry of GET /api/plugins (the registry row of one installed extension).
type plugin struct {
	ID          string          `json:"id"`
	PluginKey   string          `json:"pluginKey"`
	PackageName string          `json:"packageName"`
	Version     string          `json:"version"`
	Kind        string          `json:"kind"`
	Runtime     string          `json:"runtime"`
	Source      string          `json:"source"`
	Status      string          `json:"status"`
	Enabled     bool            `json:"enabled"`
	LastError   *string         `json:"lastError"`
	Manifest    json.RawMessage `json:"manifest"`
	UpdatedAt   time.Time       `json:"updatedAt"`
	Pending     *struct {
		Version         string   `json:"version"`
		NewCapabilities []string `json:"newCapabilities"`
	} `json:"pendingUpgrade"`
}

// DisplayName is the manifest's display name, or the key.
func (p *plugin) DisplayName() string {
	var mf struct {
		DisplayName string `json:"displayName"`
	}
	_ = json.Unmarshal(p.Manifest, &mf)
	if mf.DisplayName != "" {
		return mf.DisplayName
	}
	return p.PluginKey
}

// Description is the manifest's description.
func (p *plugin) Description() string {
	var mf struct {
		Description string `json:"description"`
	}
	_ = json.Unmarshal(p.Manifest, &mf)
	return mf.Description
}

// pluginHealth is GET /api/plugins/{id}/health.
type pluginHealth struct {
	Status    string    `json:"status"`
	Healthy   bool      `json:"healthy"`
	Message   string    `json:"message"`
	PID       int       `json:"pid"`
	Restarts  int       `json:"restarts"`
	LastError *string   `json:"lastError"`
	CheckedAt time.Time `json:"checkedAt"`
}

// pluginLogLine is an entry of GET /api/plugins/{id}/logs.
type pluginLogLine struct {
	Time    time.Time      `json:"time"`
	Level   string         `json:"level"`
	Message string         `json:"message"`
	Fields  map[string]any `json:"fields"`
}

// pluginConfig is GET /api/plugins/{id}/config.
type pluginConfig struct {
	ConfigJSON   json.RawMessage `json:"configJson"`
	ConfigSchema json.RawMessage `json:"configSchema"`
}

// bundledPlugin is an entry of GET /api/plugins/examples (the bundled catalog).
type bundledPlugin struct {
	PackageName  string `json:"packageName"`
	PluginKey    string `json:"pluginKey"`
	DisplayName  string `json:"displayName"`
	Description  string `json:"description"`
	LocalPath    string `json:"localPath"`
	Tag          string `json:"tag"`
	Experimental bool   `json:"experimental"`
}

// adapterType is an entry of GET /api/adapters (the adapter registry).
type adapterType struct {
	Type        string `json:"type"`
	Label       string `json:"label"`
	Source      string `json:"source"`
	Version     string `json:"version"`
	Key         string `json:"key"`
	ActiveKey   string `json:"activeKey"`
	PackageName string `json:"packageName"`
	Loaded      bool   `json:"loaded"`
	Override    bool   `json:"override"`
	Overrides   *struct {
		Key     string `json:"key"`
		Version string `json:"version"`
	} `json:"overrides"`
	Paused   bool   `json:"paused"`
	Disabled bool   `json:"disabled"`
	Status   string `json:"status"`
	Models   []struct {
		ID    string `json:"id"`
		Label string `json:"label"`
	} `json:"models"`
}

// adapterSchema is GET /api/adapters/{type}/config-schema.
type adapterSchema struct {
	Key          string          `json:"key"`
	ConfigSchema json.RawMessage `json:"configSchema"`
}
