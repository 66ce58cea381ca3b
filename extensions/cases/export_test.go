package cases

import "net/http"

// BuildListQuery exposes the case list's select to the plan test.
func BuildListQuery(r *http.Request, companyID string, trigrams bool) (string, []any, error) {
	q, err := buildListQuery(r, companyID, trigrams)
	if err != nil {
		return "", nil, err
	}
	return q.SQL, q.Args, nil
}
