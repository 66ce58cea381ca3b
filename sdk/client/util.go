package client

import (
	"net/url"
	"strconv"
)

func set(q url.Values, key, value string) {
	if value != "" {
		q.Set(key, value)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func itoa64(n int64) string { return strconv.FormatInt(n, 10) }

func atoi64(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}
