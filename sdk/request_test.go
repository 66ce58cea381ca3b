package sdk

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDecodeJSON(t *testing.T) {
	t.Parallel()
	type body struct {
		Name string `json:"name"`
	}
	for _, tc := range []struct {
		name     string
		body     string
		strict   bool
		wantPath string // "" with wantErr false means success
		wantErr  bool
		wantName string
	}{
		{"UnknownFieldIgnored", `{"name":"a","bogus":1}`, false, "", false, "a"},
		{"UnknownFieldStrict", `{"name":"a","bogus":1}`, true, "bogus", true, ""},
		{"EmptyBody", ``, false, "", false, ""},
		{"WrongType", `{"name":5}`, false, "name", true, ""},
		{"Malformed", `{"name":`, false, "", true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest("POST", "/", strings.NewReader(tc.body))
			var b body
			var err error
			if tc.strict {
				err = DecodeJSONStrict(r, &b)
			} else {
				err = DecodeJSON(r, &b)
			}
			if !tc.wantErr {
				require.NoError(t, err)
				require.Equal(t, tc.wantName, b.Name)
				return
			}
			var e *Error
			require.True(t, errors.As(err, &e), "%v", err)
			require.Equal(t, 400, e.Status)
			require.Equal(t, tc.wantPath, e.Details.([]ValidationDetail)[0].Path)
		})
	}
}
