package migrate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/fileset"
	"github.com/sluice-project/sluice/internal/migrate"
	"github.com/sluice-project/sluice/internal/node"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/postgres"
)

// TestCopyFilesetResults copies an installation's ingest_fileset_platform (a domain every node
// registers) to PostgreSQL: the rows arrive with their booleans, times and JSON converted.
func TestCopyFilesetResults(t *testing.T) {
	t.Parallel()
	url, schema := newSchema(t)
	ctx := t.Context()
	dir := filepath.Join(t.TempDir(), "data")
	n, err := node.Open(ctx, node.Config{DataDir: dir, Engine: true})
	if err != nil {
		t.Fatal(err)
	}
	var writes []engine.DomainWrite
	for i, st := range []string{fileset.StatusSuccess, fileset.StatusPlatform404} {
		size := int64(10 + i)
		res := fileset.Result{Status: st, Hit: st == fileset.StatusSuccess, PlatformName: "zenodo", PlatformDomain: "zenodo.org",
			PlatformID: fmt.Sprint(i), Manifest: []fileset.ManifestFile{{Path: "a.csv", Size: &size, MD5: "00"}},
			Request: json.RawMessage(fmt.Sprintf(`{"ingest_type":"dataset","base_url":"https://zenodo.org/record/%d"}`, i))}
		p, _ := json.Marshal(map[string]any{"updated": 1 + i, "result": res})
		writes = append(writes, engine.DomainWrite{Domain: fileset.DomainName, Key: fmt.Sprint(i), Payload: p, JobID: 1, ItemID: int64(i + 1)})
	}
	if err := (fileset.Domain{}).Apply(ctx, n.Store.DomainSQL(), writes); err != nil {
		t.Fatal(err)
	}
	want, err := fileset.NewResultStore(n.Store).List(ctx, fileset.ListParams{})
	if err != nil {
		t.Fatal(err)
	}
	n.Close()

	blobs, err := blob.NewDir(filepath.Join(t.TempDir(), "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrate.Copy(ctx, migrate.Config{DataDir: dir, To: openPG(t, url, schema), Blobs: blobs, Out: io.Discard}); err != nil {
		t.Fatal(err)
	}
	dst, err := node.Open(ctx, node.Config{DataDir: t.TempDir(), Blobs: blobs,
		OpenStore: func(ctx context.Context) (store.Store, error) {
			return postgres.Open(ctx, postgres.Config{URL: url, Schema: schema})
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	got, err := fileset.NewResultStore(dst.Store).List(ctx, fileset.ListParams{})
	if err != nil {
		t.Fatal(err)
	}
	// As JSON values: jsonb keeps an object's keys in an order of its own.
	wb, _ := json.Marshal(want)
	gb, _ := json.Marshal(got)
	var wv, gv any
	_ = json.Unmarshal(wb, &wv)
	_ = json.Unmarshal(gb, &gv)
	if len(want) != 2 || !reflect.DeepEqual(wv, gv) {
		t.Errorf("ingest_fileset_platform after the copy:\n got %s\nwant %s", gb, wb)
	}
	if rows, err := fileset.NewResultStore(dst.Store).List(ctx, fileset.ListParams{Status: fileset.StatusSuccess}); err != nil || len(rows) != 1 || !rows[0].Result.Hit {
		t.Errorf("successes after the copy: %+v, %v", rows, err)
	}
}
