package objects_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/action/basic"
	"github.com/sluice-project/sluice/internal/builtin"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/objects"
	"github.com/sluice-project/sluice/internal/workerproto/remotetest"
)

// TestRemoteObjects ingests three small sheets — the second with a file of the first's bytes
// (its preservation copy "already present"), the third reusing an accession number (refused by
// validation) — with every objects action served by remote workers (the worker protocol, in
// process), which read the sheet's rows, works, file sets and action states, the items' steps and
// the blob store through their tasks' read ports, and store preservation copies through the
// server; the sheets, works and file sets, with their action states, are those of the all-local
// run.
func TestRemoteObjects(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, body := range map[string]string{"a.txt": "the same bytes", "b.txt": "the same bytes", "c.txt": "other bytes",
		"d.txt": "more bytes"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	head := strings.Join(objects.Headers, ",") + "\n"
	sheets := []struct{ name, rows, want string }{
		{"first.csv", "IMAGE,w-a,f-a,a.txt,a page,S,a label,,\nIMAGE,w-a,f-d,d.txt,a page,S,a label,,\n", objects.StatusCompleted},
		{"second.csv", "IMAGE,w-b,f-b,b.txt,a page,S,a label,,\nIMAGE,w-b,f-c,c.txt,a page,S,a label,,\n", objects.StatusCompleted},
		{"third.csv", "IMAGE,w-c,f-a,c.txt,a page,S,a label,,\n", ""},
	}
	// ingest runs the sheets in order and describes what they left.
	ingest := func(t *testing.T, kit *enginetest.Kit) []string {
		var out []string
		x := objects.NewStore(kit.Store.DomainSQL())
		for _, sh := range sheets {
			id := upload(t, kit, sh.name, head+sh.rows, dir)
			s := waitSheet(t, kit, id, objects.StatusAwaitingApproval, objects.StatusRowFail, objects.StatusFileFail)
			if s.Status == objects.StatusAwaitingApproval {
				if err := objects.Approve(t.Context(), kit.Engine, id); err != nil {
					t.Fatal(err)
				}
				s = waitSheet(t, kit, id, objects.StatusCompleted, objects.StatusCompletedError)
			}
			if sh.want != "" && s.Status != sh.want {
				t.Errorf("%s: %s, want %s", sh.name, s.Status, sh.want)
			}
			out = append(out, fmt.Sprintf("sheet %s: %s %v", sh.name, s.Status, s.Errors))
			rows, err := x.ListRows(t.Context(), id, false)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				out = append(out, fmt.Sprintf("  row %d: %s %v", r.Row, r.State, r.Errors))
			}
			works, err := x.ListWorks(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range works {
				out = append(out, fmt.Sprintf("  work %s: %s", w.Accession, w.State))
				fss, err := x.WorkFileSets(t.Context(), w.Accession)
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range fss {
					full, err := x.GetFileSet(t.Context(), f.ID)
					if err != nil {
						t.Fatal(err)
					}
					var core []string
					for k, v := range full.Core {
						core = append(core, fmt.Sprintf("%s=%v", k, v))
					}
					sort.Strings(core)
					out = append(out, fmt.Sprintf("    file set %s: %s %v derivatives %d", f.Accession, full.State, core, len(full.Derivatives)))
					for _, a := range full.ActionStates {
						out = append(out, fmt.Sprintf("      %s: %s %s", a.Action, a.Outcome, a.Notes))
					}
				}
			}
		}
		return out
	}
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		t.Parallel()
		local := ingest(t, startObjects(t, open))

		var names []string
		for _, a := range (&objects.Service{}).Actions() {
			if n := a.Spec().Name; n != "objects.await-approval" { // inline: the engine runs it
				names = append(names, n)
			}
		}
		svc := &objects.Service{}
		kit := enginetest.StartWith(t, open, enginetest.Config{Domains: map[string]engine.Domain{objects.Name: objects.Domain{}},
			Engine: remotetest.Route(names...)}, append(svc.Actions(), basic.NewPass())...)
		if err := builtin.Apply(t.Context(), kit.Engine, objects.Name); err != nil {
			t.Fatal(err)
		}
		// The remote process has a service of its own: nothing but HTTP joins it to the engine.
		r := remotetest.Serve(t, kit, (&objects.Service{}).Actions(), 2, names...)
		remote := ingest(t, kit)
		for _, n := range []string{"objects.validate-sheet", "objects.create-works", "objects.create-file-sets",
			"objects.ingest-file-set", "objects.initialize-dispatch", "objects.digests", "objects.copy-to-preservation",
			"objects.file-set-complete", "objects.complete-work", "objects.complete-sheet"} {
			if r.Ran(n) == 0 {
				t.Errorf("no task of %s ran remotely", n)
			}
		}
		if !reflect.DeepEqual(remote, local) {
			t.Errorf("remote run differs from the local one:\nremote:\n%s\nlocal:\n%s", strings.Join(remote, "\n"), strings.Join(local, "\n"))
		}
		if !strings.Contains(strings.Join(remote, "\n"), "already present") {
			t.Errorf("no preservation copy was already present:\n%s", strings.Join(remote, "\n"))
		}
	})
}
