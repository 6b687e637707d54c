package ui

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"time"
)

// csrfField is the name of the hidden form field that carries the token.
const csrfField = "csrf"

// csrfTokenTTL is how long a rendered form stays usable.
const csrfTokenTTL = 12 * time.Hour

// csrfSigner makes and checks the token of each form: "<expiry unix seconds>.<HMAC-SHA256 of
// the form's action path and the expiry under the process's secret>". A token is good for
// one action path only, so a token leaked from one form cannot drive another, and it expires.
// The secret lives in memory: a restart invalidates every open form (the user reloads).
type csrfSigner struct {
	secret []byte
	ttl    time.Duration
}

func (s *csrfSigner) mac(action string, expiry int64) []byte {
	m := hmac.New(sha256.New, s.secret)
	m.Write([]byte(action))
	m.Write([]byte{0})
	m.Write([]byte(strconv.FormatInt(expiry, 10)))
	return m.Sum(nil)
}

// token returns a token for a form posting to action (the full path, prefix included).
func (s *csrfSigner) token(action string, now time.Time) string {
	expiry := now.Add(s.ttl).Unix()
	return strconv.FormatInt(expiry, 10) + "." + base64.RawURLEncoding.EncodeToString(s.mac(action, expiry))
}

// valid reports whether tok was made by token for action and has not expired.
func (s *csrfSigner) valid(tok, action string, now time.Time) bool {
	expText, macText, ok := strings.Cut(tok, ".")
	if !ok {
		return false
	}
	expiry, err := strconv.ParseInt(expText, 10, 64)
	if err != nil || now.Unix() > expiry {
		return false
	}
	got, err := base64.RawURLEncoding.DecodeString(macText)
	if err != nil {
		return false
	}
	return hmac.Equal(got, s.mac(action, expiry))
}
