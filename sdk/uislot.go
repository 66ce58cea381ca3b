package sdk

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// SlotPlaceholders are the placeholders a UI slot's route may hold; the board fills them
// from the page it renders the slot on.
var SlotPlaceholders = []string{"companyId", "issueId", "agentId", "userId"}

// SlotID is the slot's id: its ID, or its position i in the manifest's list.
func (s UISlot) SlotID(i int) string {
	if s.ID != "" {
		return s.ID
	}
	return strconv.Itoa(i)
}

// validateSlotRoute checks a slot's route: a path (and optional query) whose placeholders
// are known, matching one of the manifest's own GET routes, with each of that route's path
// parameters given by a literal or a placeholder.
func (m *Manifest) validateSlotRoute(s UISlot) error {
	bad := func(why string) error {
		return fmt.Errorf("invalid manifest %s: UI slot %q route %q %s", m.Key, s.Slot, s.Route, why)
	}
	path, query, _ := strings.Cut(s.Route, "?")
	if !strings.HasPrefix(path, "/api/") || strings.ContainsAny(s.Route, "#\\ ") {
		return bad("must be a path under /api/ without a fragment")
	}
	for _, part := range append(strings.Split(path, "/"), strings.Split(query, "&")...) {
		if err := slotPlaceholdersKnown(part, s.Slot); err != nil {
			return bad(err.Error())
		}
	}
	if query != "" {
		if _, err := url.ParseQuery(query); err != nil {
			return bad("has a malformed query")
		}
	}
	segs := strings.Split(path, "/")
	for _, r := range m.Routes {
		if r.Method != "GET" {
			continue
		}
		pat := strings.Split(r.Path, "/")
		if len(pat) != len(segs) {
			continue
		}
		match := true
		for i := range pat {
			param := strings.HasPrefix(pat[i], "{") && strings.HasSuffix(pat[i], "}")
			if !param && pat[i] != segs[i] {
				match = false
				break
			}
			if param && segs[i] == "" {
				match = false
				break
			}
		}
		if match {
			return nil
		}
	}
	return bad("is not one of the extension's GET routes")
}

// slotPlaceholderFor says whether the board can fill placeholder name on the pages of slot:
// companyId and userId everywhere but the instance's pages, issueId and agentId on the
// issue and agent detail tabs.
func slotPlaceholderFor(name, slot string) bool {
	switch name {
	case "companyId", "userId":
		return !strings.HasPrefix(slot, "instance.")
	case "issueId":
		return slot == "issue.detailTab"
	case "agentId":
		return slot == "agent.detailTab"
	}
	return false
}

// slotPlaceholdersKnown checks that every {name} in part is a placeholder the board fills
// on the slot's pages.
func slotPlaceholdersKnown(part, slot string) error {
	for {
		i := strings.IndexByte(part, '{')
		if i < 0 {
			if strings.IndexByte(part, '}') >= 0 {
				return fmt.Errorf("has an unbalanced }")
			}
			return nil
		}
		j := strings.IndexByte(part[i:], '}')
		if j < 0 {
			return fmt.Errorf("has an unbalanced {")
		}
		name := part[i+1 : i+j]
		if !slotPlaceholderFor(name, slot) {
			return fmt.Errorf("has the placeholder {%s}, which the board cannot fill on a %s slot (placeholders: %s)", name, slot, strings.Join(SlotPlaceholders, ", "))
		}
		part = part[i+j+1:]
	}
}
