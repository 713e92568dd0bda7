package server

import (
	"strings"
	"testing"
)

// TestAuth: with a token, every route but health and readiness wants it (401 with
// WWW-Authenticate); with a signing key, a process request wants its chain's signature.
func TestAuth(t *testing.T) {
	key := []byte("secret key")
	s := newServer(t, Config{Token: "t0ken", SignKey: key})
	img := pngImage(t)
	bearer := []string{"Authorization", "Bearer t0ken"}
	for _, tc := range []struct {
		name   string
		method string
		target string
		header []string
		status int
	}{
		{"healthz open", "GET", "/healthz", nil, 200},
		{"readyz open", "GET", "/readyz", nil, 200},
		{"metrics wants the token", "GET", "/metrics", nil, 401},
		{"jobs want the token", "GET", "/v1/jobs", nil, 401},
		{"unknown route wants the token", "GET", "/nothing", nil, 401},
		{"wrong token", "GET", "/v1/jobs", []string{"Authorization", "Bearer t0ken2"}, 401},
		{"not bearer", "GET", "/v1/jobs", []string{"Authorization", "Basic t0ken"}, 401},
		{"token", "GET", "/v1/jobs", bearer, 200},
		{"unsigned", "POST", processURL(thumb), bearer, 403},
		{"bad signature", "POST", processURL(thumb, "sig", Sign(key, thumb+" ")), bearer, 403},
		{"not base64", "POST", processURL(thumb, "sig", "!!"), bearer, 403},
		{"other key", "POST", processURL(thumb, "sig", Sign([]byte("other"), thumb)), bearer, 403},
		{"signed", "POST", processURL(thumb, "sig", Sign(key, thumb)), bearer, 200},
		{"signed, no token", "POST", processURL(thumb, "sig", Sign(key, thumb)), nil, 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := call(s, tc.method, tc.target, img, tc.header...)
			if w.Code != tc.status {
				t.Fatalf("%d, want %d: %s", w.Code, tc.status, w.Body)
			}
			if tc.status >= 400 {
				errorOf(t, w)
			}
			if tc.status == 401 && !strings.HasPrefix(w.Header().Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("WWW-Authenticate %q", w.Header().Get("WWW-Authenticate"))
			}
		})
	}
}

// TestSign: the signature is docs/serve.md's, unpadded base64url.
func TestSign(t *testing.T) {
	// openssl dgst -sha256 -hmac key -binary of "/v1/process\ndecode | save", base64url, no padding.
	const want = "klP9FJ8xBW_9AI5PfWG0bSzYgBd3CMHO79lDx_EfHY0"
	got := Sign([]byte("key"), "decode | save")
	if got != want {
		t.Fatalf("signature %q, want %q", got, want)
	}
	if Sign([]byte("key"), "decode | save") != got || Sign([]byte("key"), "decode | save ") == got {
		t.Fatal("a signature must depend on the chain only")
	}
}
