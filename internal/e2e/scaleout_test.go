package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/blob/blobtest"
	"github.com/sluice-project/sluice/internal/fleet"
	"github.com/sluice-project/sluice/internal/node"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/postgres"
)

// postgresURL returns the test database, skipping (or failing, in CI) when there is none.
func postgresURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("SLUICE_TEST_DATABASE_URL")
	if u == "" {
		if os.Getenv("SLUICE_TEST_REQUIRE_POSTGRES") == "1" {
			t.Fatal("SLUICE_TEST_DATABASE_URL is not set but SLUICE_TEST_REQUIRE_POSTGRES=1")
		}
		t.Skip("PostgreSQL: set SLUICE_TEST_DATABASE_URL")
	}
	return u
}

// versityGW starts a real S3 server on loopback ([blobtest.VersityGW]) with one bucket and
// returns its endpoint.
func versityGW(t *testing.T, bucket string) string {
	t.Helper()
	endpoint, data := blobtest.VersityGW(t, "sluicekey", "sluicesecret")
	if err := os.Mkdir(filepath.Join(data, bucket), 0o755); err != nil {
		t.Fatal(err)
	}
	return endpoint
}

// shared is a scale-out installation for the real binary: a fresh schema of the test database and
// a bucket on a versitygw S3 server.
type shared struct {
	dbURL  string   // the test database
	schema string   // this test's schema, dropped when it ends
	s3     string   // the S3 endpoint
	env    []string // environment for sluice processes: SLUICE_DATABASE, SLUICE_BLOBS, AWS_*
}

func newShared(t *testing.T) *shared {
	t.Helper()
	dbURL := postgresURL(t)
	endpoint := versityGW(t, "sluice")
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	schema := "sluice_e2e_" + hex.EncodeToString(b)
	sep := "?"
	if strings.Contains(dbURL, "?") {
		sep = "&"
	}
	database := dbURL + sep + "sluice_schema=" + schema
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), dbURL)
		if err == nil {
			conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
			conn.Close(context.Background())
		}
	})
	env := append(os.Environ(), "AWS_ACCESS_KEY_ID=sluicekey", "AWS_SECRET_ACCESS_KEY=sluicesecret",
		"AWS_REGION=us-east-1", "AWS_ENDPOINT_URL_S3="+endpoint, "SLUICE_DATABASE="+database, "SLUICE_BLOBS=s3://sluice/e2e")
	return &shared{dbURL: dbURL, schema: schema, s3: endpoint, env: env}
}

// TestScaleOut runs one job on PostgreSQL + S3 with three worker processes and the process that
// created the job; one worker is SIGKILLed mid-job. The job must complete with exact counts and
// no duplicate children or outputs.
func TestScaleOut(t *testing.T) {
	sh := newShared(t)
	dbURL, schema, endpoint, env := sh.dbURL, sh.schema, sh.s3, sh.env

	dir := t.TempDir()
	wf := filepath.Join(dir, "crash.yaml")
	if err := os.WriteFile(wf, []byte(crashWorkflow), 0o644); err != nil {
		t.Fatal(err)
	}
	inputs := filepath.Join(dir, "inputs")
	makeZips(t, inputs, 20, 100) // 20 roots + 2,000 children

	ctx := t.Context()
	start := func(name string, args ...string) (*exec.Cmd, *bytes.Buffer) {
		cmd := exec.CommandContext(ctx, binary, args...)
		cmd.Env = env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatalf("start %s: %v", name, err)
		}
		t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
		return cmd, &out
	}
	// The job creator also works; three more workers share the database and the bucket.
	run, runOut := start("run", "run", "--data", filepath.Join(dir, "run"), "--lease", "3s", wf, inputs)
	var workers []*exec.Cmd
	for i := 0; i < 3; i++ {
		w, _ := start("worker", "worker", "--data", filepath.Join(dir, "w", string(rune('a'+i))), "--lease", "3s")
		workers = append(workers, w)
	}
	// Kill one worker once the job is well under way.
	n, err := node.Open(ctx, node.Config{DataDir: filepath.Join(dir, "observer"), OpenStore: func(ctx context.Context) (store.Store, error) {
		return postgres.Open(ctx, postgres.Config{URL: dbURL, Schema: schema, SkipMigrate: true})
	}, Blobs: mustS3(t, endpoint)})
	if err == nil {
		defer n.Close()
		waitFor(t, 2*time.Minute, "progress before the kill", func() bool {
			p, err := n.Engine.Progress(ctx, 1)
			return err == nil && p.Items[record.ItemIngested] > 200
		})
	} else {
		waitFor(t, time.Minute, "the schema", func() bool {
			n, err = node.Open(ctx, node.Config{DataDir: filepath.Join(dir, "observer"), OpenStore: func(ctx context.Context) (store.Store, error) {
				return postgres.Open(ctx, postgres.Config{URL: dbURL, Schema: schema, SkipMigrate: true})
			}, Blobs: mustS3(t, endpoint)})
			return err == nil
		})
		defer n.Close()
	}
	// The worker to kill has started: it is in the fleet register.
	killed := fmt.Sprintf("(pid %d)", workers[0].Process.Pid)
	waitFor(t, time.Minute, "the worker to kill in the fleet register", func() bool {
		ms, err := fleet.List(ctx, n.Store, time.Now())
		return err == nil && slices.ContainsFunc(ms, func(m fleet.Member) bool { return strings.HasSuffix(m.Name, killed) })
	})
	if err := syscall.Kill(-workers[0].Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- run.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v\n%s", err, runOut.String())
		}
	case <-time.After(4 * time.Minute):
		t.Fatalf("job did not finish\n%s", runOut.String())
	}
	checkCrashJob(t, n.Store, 20, 100)

	// The fleet register, as the operations page shows it: the killed worker is flagged stale,
	// the two others are connected, and the job's process, which exited, deleted its row.
	var seen string
	poll.Until(t, time.Minute, "the killed worker flagged stale in the fleet register", func() (bool, string) {
		ms, err := fleet.List(ctx, n.Store, time.Now())
		if err != nil {
			return false, err.Error()
		}
		stale, live := 0, 0
		seen = ""
		for _, m := range ms {
			seen += fmt.Sprintf("%s stale=%v; ", m.Name, m.Stale)
			switch {
			case m.Kind != fleet.KindProcess:
			case strings.HasSuffix(m.Name, killed) && m.Stale:
				stale++
			case !strings.HasSuffix(m.Name, killed) && !m.Stale:
				live++
			}
		}
		return stale == 1 && live == 2 && len(ms) == 3, seen
	})
	t.Logf("fleet register: %s", seen)
}

// checkCrashJob checks that job 1 of crashWorkflow over zips zip files of per entries completed
// exactly: every item once and ingested without error, one document per entry, every task
// complete.
func checkCrashJob(t *testing.T, st store.Store, zips, per int) {
	t.Helper()
	ctx := t.Context()
	j, err := st.JobGet(ctx, 1)
	if err != nil || j.State != record.JobComplete {
		t.Fatalf("job %+v %v", j, err)
	}
	items, err := st.ItemList(ctx, store.ItemListParams{JobID: 1, Limit: 100_000})
	if err != nil {
		t.Fatal(err)
	}
	entries := zips * per
	if len(items) != zips+entries {
		t.Fatalf("%d items, want %d", len(items), zips+entries)
	}
	names := map[string]bool{}
	for _, it := range items {
		if names[it.Name] {
			t.Errorf("duplicate child %q", it.Name)
		}
		names[it.Name] = true
		if it.State != record.ItemIngested || it.Error != "" {
			t.Errorf("item %q: %s %q", it.Name, it.State, it.Error)
		}
	}
	outs, err := st.OutputList(ctx, store.OutputListParams{JobID: 1, Limit: 100_000})
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != entries {
		t.Errorf("%d outputs, want %d documents", len(outs), entries)
	}
	seen := map[int64]bool{}
	for _, o := range outs {
		if seen[o.ItemID] {
			t.Errorf("duplicate output of item %d", o.ItemID)
		}
		seen[o.ItemID] = true
	}
	checkSearchIndex(t, st) // the documents of a job whose worker was killed: no hit missing, none extra
	st2, _ := store.TaskStats(ctx, st, 1)
	// Every item runs detect, note (a brief no-op: held leases on Postgres) and collect; the
	// children run hash, the roots unpack.
	if want := (zips+entries)*3 + entries + zips; len(st2) != 1 || st2[record.TaskComplete] != want {
		t.Errorf("tasks %v, want only complete ones (%d)", st2, want)
	}
}

func mustS3(t *testing.T, endpoint string) blob.Store {
	t.Helper()
	s, err := blob.NewS3(t.Context(), blob.S3Config{Bucket: "sluice", Prefix: "e2e", Endpoint: endpoint, Region: "us-east-1",
		AccessKey: "sluicekey", SecretKey: "sluicesecret", PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
