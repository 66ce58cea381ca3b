package cases

import "net/http"

// BuildListQuery exposes the case list's select to the plan test.
// Modes are window (the first try) and trigram (when the window does not fill the page).
func BuildListQuery(r *http.Request, companyID string, trigram bool) (string, []any, error) {
	mode := listWindow
	if trigram {
		mode = listTrigram
	}
	q, err := buildListQuery(r, companyID, mode)
	if err != nil {
		return "", nil, err
	}
	return q.SQL, q.Args, nil
}
