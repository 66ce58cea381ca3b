package board

import "time"

// The shapes below are the parts of the API's answers the skills, folders, members and
// instance settings pages show (spec part 2 "Skills", "Folders", "Access…" and
// "Instance-admin routes").

// skillFile is an entry of a skill's file inventory.
type skillFile struct {
	Path string `json:"path"`
	Kind string `json:"kind"`
}

// skillAgent is an agent that wants a skill.
type skillAgent struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// skill is an entry of GET /api/companies/{id}/skills and its detail.
type skill struct {
	ID                 string       `json:"id"`
	Key                string       `json:"key"`
	Slug               string       `json:"slug"`
	Name               string       `json:"name"`
	Description        string       `json:"description"`
	SourceType         string       `json:"sourceType"`
	SourceLocator      *string      `json:"sourceLocator"`
	TrustLevel         string       `json:"trustLevel"`
	FileInventory      []skillFile  `json:"fileInventory"`
	FolderID           *string      `json:"folderId"`
	Editable           bool         `json:"editable"`
	EditableReason     *string      `json:"editableReason"`
	UpdatedAt          time.Time    `json:"updatedAt"`
	UsedByAgents       []skillAgent `json:"usedByAgents"`
	AttachedAgentCount *int         `json:"attachedAgentCount"`
}

// skillFileView is GET .../skills/{skillId}/files?path=.
type skillFileView struct {
	Path     string `json:"path"`
	Kind     string `json:"kind"`
	Content  string `json:"content"`
	Encoding string `json:"encoding"`
}

// skillImport is the answer of POST .../skills/import.
type skillImport struct {
	Imported []skill  `json:"imported"`
	Updated  []skill  `json:"updated"`
	Warnings []string `json:"warnings"`
}

// agentSkills is the part of GET /api/agents/{id} the skill assignment reads.
type agentSkills struct {
	ID            string   `json:"id"`
	Name          string   `json:"name"`
	DesiredSkills []string `json:"desiredSkills"`
}

// folder is an entry of GET /api/companies/{id}/folders.
type folder struct {
	ID        string  `json:"id"`
	Kind      string  `json:"kind"`
	ParentID  *string `json:"parentId"`
	Name      string  `json:"name"`
	Slug      string  `json:"slug"`
	SystemKey *string `json:"systemKey"`
	Path      string  `json:"path"`
	Depth     int     `json:"depth"`
	Position  int     `json:"position"`
	ItemCount *int    `json:"itemCount"`
}

// folderList is GET /api/companies/{id}/folders?kind=.
type folderList struct {
	Kind         string   `json:"kind"`
	Folders      []folder `json:"folders"`
	AllCount     int      `json:"allCount"`
	UnfiledCount int      `json:"unfiledCount"`
}

// routineBrief is the part of a routine list entry the folders page shows.
type routineBrief struct {
	ID       string  `json:"id"`
	Title    string  `json:"title"`
	FolderID *string `json:"folderId"`
}

// memberUser is a member's user.
type memberUser struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Email string `json:"email"`
}

// member is an entry of GET /api/companies/{id}/members.
type member struct {
	ID             string      `json:"id"`
	PrincipalType  string      `json:"principalType"`
	PrincipalID    string      `json:"principalId"`
	Status         string      `json:"status"`
	MembershipRole string      `json:"membershipRole"`
	User           *memberUser `json:"user"`
	Agent          *agent      `json:"agent"`
	CreatedAt      time.Time   `json:"createdAt"`
}

// invite is an entry of GET /api/companies/{id}/invites.
type invite struct {
	ID               string    `json:"id"`
	AllowedJoinTypes string    `json:"allowedJoinTypes"`
	MembershipRole   string    `json:"membershipRole"`
	Email            *string   `json:"email"`
	Status           string    `json:"status"`
	ExpiresAt        time.Time `json:"expiresAt"`
	CreatedAt        time.Time `json:"createdAt"`
}

// inviteCreated is the answer of POST /api/companies/{id}/invites: the only time the
// invite's token and URL are shown.
type inviteCreated struct {
	invite
	Token     string `json:"token"`
	InviteURL string `json:"inviteUrl"`
}

// joinRequest is an entry of GET /api/companies/{id}/join-requests.
type joinRequest struct {
	ID             string      `json:"id"`
	RequestType    string      `json:"requestType"`
	Status         string      `json:"status"`
	RequestingUser *memberUser `json:"requestingUser"`
	AgentName      *string     `json:"agentName"`
	AdapterType    *string     `json:"adapterType"`
	CreatedAt      time.Time   `json:"createdAt"`
}

// boardCaller is the part of GET /api/cli-auth/me the pages read to know what to offer.
type boardCaller struct {
	UserID          string `json:"userId"`
	IsInstanceAdmin bool   `json:"isInstanceAdmin"`
}

// userProfile is the part of GET /api/companies/{id}/users/{userId}/profile the pages read:
// the caller's permission keys in the company (role defaults plus explicit grants).
type userProfile struct {
	MembershipRole string   `json:"membershipRole"`
	Permissions    []string `json:"permissions"`
}
