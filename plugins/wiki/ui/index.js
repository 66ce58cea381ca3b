// The LLM Wiki's UI entry: a sidebar link and a page that reads the wiki through the
// plugin's routes (/api/plugins/keelhq.llm_wiki/api/...).
export function SidebarLink({ navigate }) {
  return { type: "link", label: "Wiki", onClick: () => navigate("wiki") };
}

export async function WikiPage({ companyId, fetchJSON }) {
  const overview = await fetchJSON(`/api/plugins/keelhq.llm_wiki/api/overview?companyId=${companyId}`);
  const spaces = await fetchJSON(`/api/plugins/keelhq.llm_wiki/api/spaces?companyId=${companyId}`);
  return { type: "wiki", overview, spaces: spaces.spaces };
}
