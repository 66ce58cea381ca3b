package client

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestReadEvents(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, stream string
		want         []string
	}{
		{"Comments and retry are skipped", "retry: 2000\n:ok\n\nid: 1\ndata: {\"id\":\"a\",\"action\":\"x\"}\n\n:ping\n\n", []string{"a"}},
		{"No space after the colon", "data:{\"id\":\"b\"}\n\n", []string{"b"}},
		{"Data split over lines", "id: 3\ndata: {\"id\":\ndata: \"c\"}\n\n", []string{"c"}},
		{"Two events", "data: {\"id\":\"d\"}\n\ndata: {\"id\":\"e\"}\n\n", []string{"d", "e"}},
		{"Unfinished event is not delivered", "data: {\"id\":\"f\"}\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			err := readEvents(strings.NewReader(tc.stream), func(e *ActivityEntry) error {
				got = append(got, e.ID)
				if string(e.JSON()) == "" {
					t.Error("the entry keeps the server's JSON")
				}
				return nil
			})
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("a stream that ends is an unexpected EOF, got %v", err)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
	bad := readEvents(strings.NewReader("data: {not json\n\n"), func(*ActivityEntry) error { return nil })
	if bad == nil || errors.Is(bad, io.ErrUnexpectedEOF) {
		t.Fatalf("malformed data is an error of its own, got %v", bad)
	}
}
