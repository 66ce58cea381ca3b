package routines

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Webhook signing modes (REFERENCE.md "Decided where the spec is ambiguous"):
//
//   - bearer: Authorization: Bearer <secret>.
//   - hmac_sha256: the timestamped mode. X-Service-Signature: [sha256=]<hex HMAC-SHA256(secret,
//     "<ts>." + rawBody)> and X-Service-Timestamp: <ts> in seconds, or milliseconds when
//     above 1e12, within the trigger's replay window of now (either side). X-Hub-Signature-256
//     is accepted in place of X-Service-Signature.
//   - forge_hmac: the raw body alone. X-Hub-Signature-256: [sha256=]<hex HMAC-SHA256(secret,
//     rawBody)>, with X-Service-Signature accepted in its place.
//   - none: nothing is checked.
//
// Every comparison of secret material is constant-time (hmac.Equal).
const (
	signingBearer     = "bearer"
	signingHMACSHA256 = "hmac_sha256"
	signingForgeHMAC  = "forge_hmac"
	signingNone       = "none"
)

var signingModes = []string{signingBearer, signingHMACSHA256, signingForgeHMAC, signingNone}

// Signature headers.
const (
	headerServiceSignature = "X-Service-Signature"
	headerHubSignature     = "X-Hub-Signature-256"
	headerServiceTimestamp = "X-Service-Timestamp"
)

// Replay window bounds, in seconds.
const (
	replayWindowMin     = 30
	replayWindowMax     = 86400
	replayWindowDefault = 300
)

// signatureError is a refused webhook request; Reason is safe to show the caller.
type signatureError struct{ Reason string }

func (e *signatureError) Error() string { return e.Reason }

func refuse(reason string) error { return &signatureError{Reason: reason} }

// webhookRequest is what a signature check reads.
type webhookRequest struct {
	Mode         string
	Secret       string
	Header       http.Header
	Body         []byte
	ReplayWindow time.Duration
	Now          time.Time
}

// verifyWebhook checks a public fire request against its trigger's signing mode.
func verifyWebhook(r *webhookRequest) error {
	switch r.Mode {
	case signingNone:
		return nil
	case signingBearer:
		auth := strings.TrimSpace(r.Header.Get("Authorization"))
		scheme, token, ok := strings.Cut(auth, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
			return refuse("Missing webhook bearer token")
		}
		if !hmac.Equal([]byte(strings.TrimSpace(token)), []byte(r.Secret)) {
			return refuse("Invalid webhook bearer token")
		}
		return nil
	case signingHMACSHA256:
		sig := firstHeader(r.Header, headerServiceSignature, headerHubSignature)
		ts := strings.TrimSpace(r.Header.Get(headerServiceTimestamp))
		if sig == "" || ts == "" {
			return refuse("Missing webhook signature or timestamp")
		}
		at, ok := parseWebhookTimestamp(ts)
		if !ok {
			return refuse("Invalid webhook timestamp")
		}
		if d := r.Now.Sub(at); d > r.ReplayWindow || d < -r.ReplayWindow {
			return refuse("Webhook timestamp is outside the replay window")
		}
		if !signatureMatches(sig, r.Secret, []byte(ts+"."), r.Body) {
			return refuse("Invalid webhook signature")
		}
		return nil
	case signingForgeHMAC:
		sig := firstHeader(r.Header, headerHubSignature, headerServiceSignature)
		if sig == "" {
			return refuse("Missing webhook signature")
		}
		if !signatureMatches(sig, r.Secret, nil, r.Body) {
			return refuse("Invalid webhook signature")
		}
		return nil
	}
	return refuse("Unknown webhook signing mode")
}

func firstHeader(h http.Header, names ...string) string {
	for _, n := range names {
		if v := strings.TrimSpace(h.Get(n)); v != "" {
			return v
		}
	}
	return ""
}

// parseWebhookTimestamp reads Unix seconds, or milliseconds when the number exceeds 1e12.
func parseWebhookTimestamp(s string) (time.Time, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}, false
	}
	if n > 1e12 {
		return time.UnixMilli(n), true
	}
	return time.Unix(n, 0), true
}

// signatureMatches compares a hex signature (an optional "sha256=" prefix, any case) with
// HMAC-SHA256(secret, prefix + body) in constant time.
func signatureMatches(sig, secret string, prefix, body []byte) bool {
	if len(sig) >= 7 && strings.EqualFold(sig[:7], "sha256=") {
		sig = sig[7:]
	}
	got, err := hex.DecodeString(strings.TrimSpace(sig))
	if err != nil || len(got) != sha256.Size {
		return false
	}
	return hmac.Equal(got, webhookHMAC(secret, prefix, body))
}

// webhookHMAC is HMAC-SHA256(secret, prefix + body).
func webhookHMAC(secret string, prefix, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(prefix)
	m.Write(body)
	return m.Sum(nil)
}
