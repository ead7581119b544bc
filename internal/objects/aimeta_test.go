package objects_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluice-project/sluice/internal/action/basic"
	"github.com/sluice-project/sluice/internal/builtin"
	"github.com/sluice-project/sluice/internal/egress"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/objects"
	"github.com/sluice-project/sluice/internal/store/drivertest"
)

// TestGenerateAIMetadata runs GenerateAIMetadata on an access image (a custom chain: digests,
// then it) four ways: not configured (ok, "skipped: not configured", never started, nothing
// recorded); a command — a small local fake that prints a JSON object of the image's size and
// its file set — whose object becomes the file set's ai_metadata; an HTTP service on loopback
// the egress policy allows, which receives the image's bytes and MIME type; and that service
// under the default policy, which refuses loopback: the file set fails, saying so, without a
// request reaching it. The object's numbers are the file set's as written (a 20-digit id, 1.50).
func TestGenerateAIMetadata(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pngFile(t, filepath.Join(dir, "a.png"), 1)
	fi, err := os.Stat(filepath.Join(dir, "a.png"))
	if err != nil {
		t.Fatal(err)
	}
	size := json.Number(strconv.FormatInt(fi.Size(), 10))
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, `{"subjects": ["Rivers"], "bytes": %d, "type": %q, "file_set": %q, "id": 12345678901234567890, "score": 1.50}`, len(b), r.Header.Get("Content-Type"), r.Header.Get("X-Sluice-File-Set-Id"))
	}))
	defer srv.Close()
	loopback, err := egress.New([]string{"127.0.0.1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := builtin.Source(objects.Name)
	src := string(raw)
	withStep := func(with string) string {
		out := strings.Replace(src, "    action: objects.generate-ai-metadata\n", "    action: objects.generate-ai-metadata\n    with: "+with+"\n", 1)
		if out == src {
			t.Fatal("the built-in workflow has no generate-ai-metadata step")
		}
		return out
	}
	id := objects.FileSetID("f-ai")
	command := `{command: [sh, -c, 'printf "{\"bytes\": %s, \"file_set\": \"%s\"}" "$(wc -c < "$1")" "$SLUICE_FILE_SET_ID"', sh, "{file}"]}`
	for _, tc := range []struct {
		name     string
		workflow string
		policy   *egress.Policy
		state    string
		note     string
		want     map[string]any
		requests int32
	}{
		{"not configured", src, nil, objects.StateComplete, "skipped: not configured", nil, 0},
		{"command", withStep(command), nil, objects.StateComplete, "from the command sh: bytes, file_set",
			map[string]any{"bytes": size, "file_set": id}, 0},
		{"service", withStep(fmt.Sprintf("{url: %q}", srv.URL)), loopback, objects.StateComplete, "from the service " + srv.URL,
			map[string]any{"bytes": size, "type": "image/png", "file_set": id, "subjects": []any{"Rivers"},
				"id": json.Number("12345678901234567890"), "score": json.Number("1.50")}, 1},
		{"service refused", withStep(fmt.Sprintf("{url: %q}", srv.URL)), nil, objects.StateError, "refused", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			requests.Store(0)
			svc := &objects.Service{Egress: tc.policy}
			kit := enginetest.StartWith(t, drivertest.OpenSQLite, enginetest.Config{Domains: map[string]engine.Domain{objects.Name: objects.Domain{}}},
				append(svc.Actions(), basic.NewPass())...)
			if _, _, err := kit.Engine.ApplyWorkflow(t.Context(), []byte(tc.workflow), "objects.yaml"); err != nil {
				t.Fatal(err)
			}
			sid, err := objects.Upload(t.Context(), kit.Engine, kit.Blobs, objects.UploadParams{Name: "ai.csv", FilesDir: dir,
				CSV:           strings.NewReader(strings.Join(objects.Headers, ",") + "\nIMAGE,w-ai,f-ai,a.png,a river,A,river,true,\n"),
				CustomActions: []string{"GenerateFileSetDigests", "GenerateAIMetadata"}})
			if err != nil {
				t.Fatal(err)
			}
			waitSheet(t, kit, sid, objects.StatusAwaitingApproval)
			if err := objects.Approve(t.Context(), kit.Engine, sid); err != nil {
				t.Fatal(err)
			}
			waitSheet(t, kit, sid, objects.StatusCompleted, objects.StatusCompletedError)
			f, err := objects.NewStore(kit.Store.DomainSQL()).GetFileSet(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			var st objects.ActionState
			for _, a := range f.ActionStates {
				if a.Action == "GenerateAIMetadata" {
					st = a
				}
			}
			if f.State != tc.state || !strings.Contains(st.Notes, tc.note) {
				t.Errorf("file set %s, GenerateAIMetadata %+v; want %s, a note with %q", f.State, st, tc.state, tc.note)
			}
			got, _ := json.Marshal(f.Core["ai_metadata"])
			want, _ := json.Marshal(tc.want)
			if tc.want == nil {
				want = []byte("null")
			}
			if string(got) != string(want) || tc.want != nil && !reflect.DeepEqual(f.Core["ai_metadata"], any(tc.want)) {
				t.Errorf("ai_metadata %s (%#v), want %s", got, f.Core["ai_metadata"], want)
			}
			if requests.Load() != tc.requests {
				t.Errorf("%d requests reached the service, want %d", requests.Load(), tc.requests)
			}
			h, err := objects.NewStore(kit.Store.DomainSQL()).History(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range h {
				if e.Action == "GenerateAIMetadata" && e.Outcome == objects.OutcomeStarted && tc.name == "not configured" {
					t.Errorf("GenerateAIMetadata started though not configured")
				}
			}
		})
	}
}
