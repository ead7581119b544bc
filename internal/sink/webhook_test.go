package sink_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/sink"
)

// TestWebhookErrorsHideSecrets checks that a webhook sink's errors — an unreachable receiver,
// a URL that does not parse — name the URL without its password or its secret query values,
// while the receiver still gets the query (its token authenticates Sluice).
func TestWebhookErrorsHideSecrets(t *testing.T) {
	t.Parallel()
	const pass, token, hmacKey = "pass-a1b2c3", "token-d4e5f6", "hmac-g7h8i9"
	secrets := []string{pass, token, hmacKey}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	s, err := sink.Open(t.Context(), "http://hook:"+pass+"@"+closed+"/in?token="+token+"&secret="+hmacKey, sink.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	errs := s.Send(t.Context(), []sink.Message{{ID: "m1", Subject: "s", Body: []byte(`{}`)}})
	if errs[0] == nil {
		t.Fatal("a send to a closed port succeeded")
	}
	for _, sec := range secrets {
		if strings.Contains(errs[0].Error(), sec) {
			t.Errorf("the send's error shows %q: %v", sec, errs[0])
		}
	}
	if !strings.Contains(errs[0].Error(), "token=xxxxx") {
		t.Errorf("the send's error does not name the masked URL: %v", errs[0])
	}

	_, err = sink.Open(t.Context(), "http://hook:"+pass+"@host/%zz?token="+token, sink.Options{})
	if err == nil {
		t.Fatal("a URL with a bad escape opened")
	}
	for _, sec := range secrets {
		if strings.Contains(err.Error(), sec) {
			t.Errorf("the open's error shows %q: %v", sec, err)
		}
	}

	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.URL.RawQuery
	}))
	defer srv.Close()
	s2, err := sink.Open(t.Context(), srv.URL+"/in?token="+token+"&secret="+hmacKey, sink.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if errs := s2.Send(t.Context(), []sink.Message{{ID: "m1", Subject: "s", Body: []byte(`{}`)}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if q := <-got; q != "token="+token {
		t.Errorf("the receiver got the query %q, want the token and not the signing secret", q)
	}
}
