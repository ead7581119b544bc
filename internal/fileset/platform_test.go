package fileset

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/egress"
)

// TestAPIGetBounds: a platform's answer is decoded only within the bounds its listing could
// need (with MaxManifest 5: 50 members in a list, 500 values in all), so one list too long, or
// too many values spread over short lists, is refused with a plain reason and nothing decoded;
// a listing at the bounds decodes whole. An error answer is quoted only at its start.
func TestAPIGetBounds(t *testing.T) {
	t.Parallel()
	files := func(n int) string { return `{"data":{"files":[` + strings.Repeat(`{},`, n-1) + `{}]}}` }
	docs := map[string]string{
		"/at-bounds":  files(50),
		"/long-list":  files(51),
		"/many-keys":  `{"data":{` + strings.Repeat(`"k":1,`, 50) + `"k":1}}`,
		"/spread":     `{"data":{"files":[` + strings.Repeat(`[1,1,1,1,1,1,1,1,1,1,1],`, 49) + `[]]}}`,
		"/not-json":   `<html>`,
		"/long-error": strings.Repeat("x", 100000),
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/long-error" {
			http.Error(w, docs[r.URL.Path], http.StatusNotFound)
			return
		}
		w.Write([]byte(docs[r.URL.Path]))
	}))
	t.Cleanup(srv.Close)
	p, err := egress.New([]string{"127.0.0.1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{Egress: p, PartialDir: t.TempDir(), Limits: Limits{MaxManifest: 5}})
	for _, c := range []struct {
		name, path string
		status     string // "" for none
		msg        string // in the error
		decoded    int    // files decoded
	}{
		{name: "at the bounds", path: "/at-bounds", decoded: 50},
		{name: "one list too long", path: "/long-list", status: StatusPlatformError, msg: "the answer has a list of over 50 entries"},
		{name: "an object of too many members", path: "/many-keys", status: StatusPlatformError, msg: "the answer has a list of over 50 entries"},
		{name: "too many values in short lists", path: "/spread", status: StatusPlatformError, msg: "the answer has over 500 values"},
		{name: "not JSON", path: "/not-json", status: StatusPlatformError, msg: "decode: invalid character"},
		{name: "long error answer", path: "/long-error", status: StatusPlatform404, msg: `"xxxx`},
	} {
		var doc struct {
			Data struct {
				Files []struct{} `json:"files"`
			} `json:"data"`
		}
		_, err := apiGet(t.Context(), s.fetch, srv.URL+c.path, &doc)
		st, msg, _ := asStatus(err)
		if st != c.status || !strings.Contains(msg, c.msg) || (c.status == "") != (err == nil) {
			t.Errorf("%s: %v; want %q with %q", c.name, err, c.status, c.msg)
		}
		if len(doc.Data.Files) != c.decoded {
			t.Errorf("%s: %d files decoded, want %d", c.name, len(doc.Data.Files), c.decoded)
		}
		if len(msg) > len(srv.URL)+len(c.path)+maxQuoted+100 {
			t.Errorf("%s: an error of %d bytes", c.name, len(msg))
		}
	}
}
