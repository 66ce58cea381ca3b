package routines

import (
	"encoding/hex"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func sign(secret, prefix, body string) string {
	return hex.EncodeToString(webhookHMAC(secret, []byte(prefix), []byte(body)))
}

func TestVerifyWebhook(t *testing.T) {
	t.Parallel()
	const secret = "s3cret"
	const body = `{"payload":{"n":1}}`
	now := time.Unix(1_800_000_000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	tsMs := strconv.FormatInt(now.UnixMilli(), 10)
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	cases := []struct {
		name   string
		mode   string
		header http.Header
		body   string
		now    time.Time
		want   string // "" accepts
	}{
		{"none accepts anything", signingNone, hdr(), body, now, ""},
		{"bearer", signingBearer, hdr("Authorization", "Bearer "+secret), body, now, ""},
		{"bearer scheme is case-insensitive", signingBearer, hdr("Authorization", "bearer "+secret), body, now, ""},
		{"bearer wrong secret", signingBearer, hdr("Authorization", "Bearer nope"), body, now, "Invalid webhook bearer token"},
		{"bearer secret prefix", signingBearer, hdr("Authorization", "Bearer s3cre"), body, now, "Invalid webhook bearer token"},
		{"bearer missing", signingBearer, hdr(), body, now, "Missing webhook bearer token"},
		{"bearer other scheme", signingBearer, hdr("Authorization", "Basic "+secret), body, now, "Missing webhook bearer token"},

		{"hmac seconds", signingHMACSHA256, hdr(headerServiceSignature, "sha256="+sign(secret, ts+".", body),
			headerServiceTimestamp, ts), body, now, ""},
		{"hmac without prefix", signingHMACSHA256, hdr(headerServiceSignature, sign(secret, ts+".", body),
			headerServiceTimestamp, ts), body, now, ""},
		{"hmac milliseconds", signingHMACSHA256, hdr(headerServiceSignature, "sha256="+sign(secret, tsMs+".", body),
			headerServiceTimestamp, tsMs), body, now, ""},
		{"hmac hub header", signingHMACSHA256, hdr(headerHubSignature, "sha256="+sign(secret, ts+".", body),
			headerServiceTimestamp, ts), body, now, ""},
		{"hmac edge of window", signingHMACSHA256, hdr(headerServiceSignature, sign(secret, ts+".", body),
			headerServiceTimestamp, ts), body, now.Add(300 * time.Second), ""},
		{"hmac stale", signingHMACSHA256, hdr(headerServiceSignature, sign(secret, ts+".", body),
			headerServiceTimestamp, ts), body, now.Add(301 * time.Second), "outside the replay window"},
		{"hmac from the future", signingHMACSHA256, hdr(headerServiceSignature, sign(secret, ts+".", body),
			headerServiceTimestamp, ts), body, now.Add(-301 * time.Second), "outside the replay window"},
		{"hmac tampered body", signingHMACSHA256, hdr(headerServiceSignature, sign(secret, ts+".", body),
			headerServiceTimestamp, ts), body + " ", now, "Invalid webhook signature"},
		{"hmac wrong secret", signingHMACSHA256, hdr(headerServiceSignature, sign("other", ts+".", body),
			headerServiceTimestamp, ts), body, now, "Invalid webhook signature"},
		{"hmac timestamp swapped", signingHMACSHA256, hdr(headerServiceSignature, sign(secret, ts+".", body),
			headerServiceTimestamp, strconv.FormatInt(now.Unix()+1, 10)), body, now, "Invalid webhook signature"},
		{"hmac untimestamped signature", signingHMACSHA256, hdr(headerServiceSignature, sign(secret, "", body),
			headerServiceTimestamp, ts), body, now, "Invalid webhook signature"},
		{"hmac missing timestamp", signingHMACSHA256, hdr(headerServiceSignature, sign(secret, ts+".", body)), body, now,
			"Missing webhook signature or timestamp"},
		{"hmac missing signature", signingHMACSHA256, hdr(headerServiceTimestamp, ts), body, now, "Missing webhook signature"},
		{"hmac bad timestamp", signingHMACSHA256, hdr(headerServiceSignature, sign(secret, "x.", body),
			headerServiceTimestamp, "x"), body, now, "Invalid webhook timestamp"},
		{"hmac not hex", signingHMACSHA256, hdr(headerServiceSignature, "sha256=zz", headerServiceTimestamp, ts), body, now,
			"Invalid webhook signature"},

		{"forge hub header", signingForgeHMAC, hdr(headerHubSignature, "sha256="+sign(secret, "", body)), body, now, ""},
		{"forge service header", signingForgeHMAC, hdr(headerServiceSignature, sign(secret, "", body)), body, now, ""},
		{"forge needs no timestamp", signingForgeHMAC, hdr(headerHubSignature, "sha256="+sign(secret, "", body)), body,
			now.Add(48 * time.Hour), ""},
		{"forge tampered body", signingForgeHMAC, hdr(headerHubSignature, "sha256="+sign(secret, "", body)), `{"payload":{"n":2}}`,
			now, "Invalid webhook signature"},
		{"forge wrong secret", signingForgeHMAC, hdr(headerHubSignature, "sha256="+sign("other", "", body)), body, now,
			"Invalid webhook signature"},
		{"forge missing", signingForgeHMAC, hdr(), body, now, "Missing webhook signature"},
		{"forge truncated", signingForgeHMAC, hdr(headerHubSignature, sign(secret, "", body)[:40]), body, now,
			"Invalid webhook signature"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := verifyWebhook(&webhookRequest{Mode: tc.mode, Secret: secret, Header: tc.header, Body: []byte(tc.body),
				ReplayWindow: 300 * time.Second, Now: tc.now})
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestParseWebhookTimestamp(t *testing.T) {
	t.Parallel()
	at, ok := parseWebhookTimestamp("1800000000")
	require.True(t, ok)
	require.Equal(t, int64(1_800_000_000), at.Unix())
	at, ok = parseWebhookTimestamp("1800000000123")
	require.True(t, ok)
	require.Equal(t, int64(1_800_000_000_123), at.UnixMilli())
	for _, bad := range []string{"", "-5", "0", "1.5", "abc"} {
		_, ok := parseWebhookTimestamp(bad)
		require.False(t, ok, bad)
	}
}
