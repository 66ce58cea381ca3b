package procrun

import (
	"sort"
	"strings"
)

// inheritedVars are the only variables of keel's own environment an agent process sees:
// where to find programs, who and where it is, its locale and time zone, proxies and CA
// certificates, and the runtime service address. Nothing else passes (DATABASE_URL,
// PGPASSWORD, SERVICE_SECRETS_MASTER_KEY, cloud credentials, the extension handshake), so an
// agent's command learns nothing of keel's database or keys.
var inheritedVars = map[string]bool{
	"PATH": true, "HOME": true, "USER": true, "LOGNAME": true, "SHELL": true, "TERM": true,
	"LANG": true, "LANGUAGE": true, "TZ": true, "TMPDIR": true,
	"HTTP_PROXY": true, "HTTPS_PROXY": true, "NO_PROXY": true, "http_proxy": true, "https_proxy": true, "no_proxy": true,
	"SSL_CERT_FILE": true, "SSL_CERT_DIR": true,
	"SERVICE_RUNTIME_API_URL": true, "SERVICE_LISTEN_HOST": true, "SERVICE_LISTEN_PORT": true,
}

// passesToRun reports whether an inherited variable may pass to an agent process.
func passesToRun(k string) bool { return inheritedVars[k] || strings.HasPrefix(k, "LC_") }

// BuildEnv composes a run's environment: the allowed part of the inherited environment
// (inheritedVars, LC_*), then the config env, then the request's env, which wins.
// authToken becomes SERVICE_API_KEY when the request env does not set it.
func BuildEnv(inherited []string, configEnv, requestEnv map[string]string, authToken string) []string {
	env := map[string]string{}
	for _, kv := range inherited {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !passesToRun(k) {
			continue
		}
		env[k] = v
	}
	for k, v := range configEnv {
		env[k] = v
	}
	if authToken != "" {
		if _, ok := requestEnv["SERVICE_API_KEY"]; !ok {
			env["SERVICE_API_KEY"] = authToken
		}
	}
	for k, v := range requestEnv {
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
