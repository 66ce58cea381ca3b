package board

// uiContribution is an entry of GET /api/plugins/ui-contributions: the UI slots of one
// enabled plugin (a disabled plugin has none).
type uiContribution struct {
	PluginID    string   `json:"pluginId"`
	PluginKey   string   `json:"pluginKey"`
	DisplayName string   `json:"displayName"`
	Slots       []uiSlot `json:"slots"`
}

// uiSlot is one UI slot of a manifest.
type uiSlot struct {
	Slot        string `json:"slot"`
	ID          string `json:"id"`
	Entry       string `json:"entry"`
	Route       string `json:"route"`
	Role        string `json:"role"`
	DisplayName string `json:"displayName"`
}
