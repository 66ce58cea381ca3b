// The kitchen's sidebar: reads the last webhook through the bridge.
export async function Sidebar({ pluginId, companyId }) {
  const res = await fetch(`/api/plugins/${pluginId}/data/last-webhook`, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ companyId }),
  });
  return (await res.json()).data;
}
