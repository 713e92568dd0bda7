package server

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
)

// signedPath is what a signature covers besides the chain: the route, so that a signature
// made for one route is worth nothing on another.
const signedPath = "/v1/process"

// Sign returns the signature of a process request for spec under key (docs/serve.md): the
// unpadded base64url HMAC-SHA256 of "/v1/process\n" + spec.
func Sign(key []byte, spec string) string {
	return base64.RawURLEncoding.EncodeToString(mac(key, spec))
}

func mac(key []byte, spec string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(signedPath + "\n" + spec))
	return m.Sum(nil)
}

// authorized checks the bearer token, answering 401 when it is missing or another one.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	if s.cfg.Token == "" {
		return true
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if ok && subtle.ConstantTimeCompare([]byte(got), []byte(s.cfg.Token)) == 1 {
		return true
	}
	msg := "this server wants a token: send Authorization: Bearer TOKEN"
	if ok {
		msg = "the bearer token is not this server's"
	}
	writeError(w, http.StatusUnauthorized, errors.New(msg))
	return false
}

// checkSignature checks a process request's sig against its chain when the server has a
// signing key; a missing or wrong one is a 403.
func (s *Server) checkSignature(r *http.Request, spec string) error {
	if len(s.cfg.SignKey) == 0 {
		return nil
	}
	sig := r.URL.Query().Get("sig")
	if sig == "" {
		return statusErr(http.StatusForbidden, errors.New("this server wants signed requests: add sig=SIGNATURE of the chain (imgpipe serve sign)"))
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, mac(s.cfg.SignKey, spec)) {
		return statusErr(http.StatusForbidden, errors.New("the signature does not match the chain"))
	}
	return nil
}
