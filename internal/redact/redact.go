// Package redact hides secrets in what Sluice shows: URLs printed in logs, errors, CLI output,
// the API and the web UI ([URL]), and the names of query parameters and headers that carry
// secrets ([Secret]). Sinks, sources, databases and blob stores take URLs that hold their
// credentials (user:password@, ?token=, ?X-Amz-Signature=); everything that prints one goes
// through [URL], so that a secret is masked the same way wherever it would appear.
package redact

import (
	"errors"
	"net/url"
	"strings"
)

// Mask replaces each secret [URL] hides.
const Mask = "xxxxx"

// URL returns raw with its secrets replaced by [Mask], for display: the password of its
// userinfo (or the whole userinfo when it has no password, as a token given as the user name:
// https://TOKEN@host, nats://TOKEN@host), and the value of each query parameter and fragment
// parameter whose name is [Secret]. Everything else is kept as written. A string that does
// not parse as a URL is returned as "(invalid URL)", since its secrets cannot be found.
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(invalid URL)"
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), Mask)
		} else {
			u.User = url.User(Mask)
		}
	}
	u.RawQuery = maskPairs(u.RawQuery)
	frag := u.EscapedFragment()
	u.Fragment, u.RawFragment = "", ""
	s := u.String()
	if frag != "" {
		s += "#" + maskPairs(frag)
	}
	return s
}

// maskPairs masks the values of the secret names of an encoded name=value&… list, keeping the
// order and the encoding of the rest.
func maskPairs(q string) string {
	if q == "" {
		return q
	}
	parts := strings.Split(q, "&")
	for i, p := range parts {
		k, _, hasValue := strings.Cut(p, "=")
		name, err := url.QueryUnescape(k)
		if err != nil {
			name = k
		}
		if hasValue && Secret(name) {
			parts[i] = k + "=" + Mask
		}
	}
	return strings.Join(parts, "&")
}

// Error masks, in place, the URL of each *url.Error in err's chain (net/http's client puts the
// request's URL, query and all, in its errors; it hides only the password) and returns err.
// Call it where the error is made, before anything wraps it: fmt.Errorf's text is fixed when
// it is made.
func Error(err error) error {
	for e := err; e != nil; {
		var ue *url.Error
		if !errors.As(e, &ue) {
			break
		}
		ue.URL = URL(ue.URL)
		e = ue.Err
	}
	return err
}

// secretWords are the words of a name that make it secret on their own: "key" and "auth"
// match as whole words only ("X-Api-Key", "auth"), not inside "keyword" or "author".
var secretWords = map[string]bool{
	"key": true, "sig": true, "pass": true, "pwd": true, "auth": true, "jwt": true, "session": true,
	"bearer": true, "otp": true,
}

// secretParts are the strings that make a name secret anywhere in it, its words joined
// ("accesstoken", "xamzsignature", "clientsecret").
var secretParts = []string{
	"token", "secret", "passw", "signature", "credential", "cookie", "authorization",
	"apikey", "privatekey", "accesskey", "sessionid",
}

// Secret reports whether a query parameter or a header of this name carries a secret: a
// token, key, secret, password, signature, credential, cookie or authorization of any spelling
// (access_token, api_key, apikey, X-Amz-Signature, X-Amz-Credential, X-Auth-Token, Cookie,
// Set-Cookie, Proxy-Authorization, client_secret, sig, pwd), or any name ending in "key".
// Names are compared case-insensitively, their words split at '-', '_', '.' and spaces.
func Secret(name string) bool {
	words := strings.FieldsFunc(strings.ToLower(name), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
	})
	for _, w := range words {
		if secretWords[w] {
			return true
		}
	}
	joined := strings.Join(words, "")
	for _, p := range secretParts {
		if strings.Contains(joined, p) {
			return true
		}
	}
	return strings.HasSuffix(joined, "key")
}
