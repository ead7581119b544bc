package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/store/postgres"
)

// TestPostgresFailover ingests the whole public corpus on a pg_auto_failover formation (a
// monitor, a primary and a synchronous standby, on loopback) through three `sluice worker`
// processes and the `sluice ingest` that made the job, all given the multi-host URL
// (target_session_attrs=read-write). At a random moment — while the ingest records the job's
// roots, or at a random count of ingested items — the primary's machine dies (its keeper and
// postgres SIGKILLed): the monitor promotes the standby, every process reconnects (the ingest's
// submission waits for the database and takes up where it stopped), and the job completes with
// an export byte for byte equal to the uninterrupted run's (TestCorpus's), every document once,
// in one job. It logs the seconds no write could commit and the work run again (attempts lost
// with the primary).
func TestPostgresFailover(t *testing.T) {
	haRequired(t)
	t.Parallel()
	files, err := corpusFiles()
	if err != nil {
		t.Fatalf("the shared corpus is missing: %v", err)
	}
	skipWithoutTools(t, corpusTools(files))
	corpusRefs.begin(referenceRun) // the uninterrupted run, beside this one
	endpoint := versityGW(t, "sluice")
	ha := startPGHA(t, false)
	ctx := t.Context()
	dir := t.TempDir()
	url := ha.URL()
	env := append(os.Environ(), "AWS_ACCESS_KEY_ID=sluicekey", "AWS_SECRET_ACCESS_KEY=sluicesecret",
		"AWS_REGION=us-east-1", "AWS_ENDPOINT_URL_S3="+endpoint, "SLUICE_DATABASE="+url, "SLUICE_BLOBS=s3://sluice/ha")
	if out, err := exec.CommandContext(ctx, binary, "migrate", "up", "--database", url).CombinedOutput(); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	start := func(name string, args ...string) *proc {
		return startProc(t, name, binary, env, append(args, "--lease", "3s", "-v", "--log-format", "text")...)
	}
	var all []*proc
	for _, w := range []string{"a", "b", "c"} {
		all = append(all, start("worker "+w, "worker", "--data", filepath.Join(dir, "w", w)))
	}
	ingest := start("ingest", append([]string{"ingest", "--data", filepath.Join(dir, "ingest")}, files...)...)
	all = append(all, ingest)
	done := make(chan error, 1)
	go func() { done <- ingest.cmd.Wait() }()
	dump := func() string {
		var s string
		for _, p := range all {
			s += fmt.Sprintf("--- %s:\n%s\n", p.name, lastLines(p.out.String(), 15))
		}
		return s + ha.logs()
	}

	// The kill's moment, once the job exists: in one run of four while `sluice ingest` records
	// the job's roots (it stores the inputs' blobs, then adds the roots and seals the job),
	// otherwise at a random count of ingested items, between 2% and 60% of the corpus's
	// 20,000-odd documents. SLUICE_TEST_HA_SEED=<seed> replays a run's choice.
	seed := time.Now().UnixNano()
	if s := os.Getenv("SLUICE_TEST_HA_SEED"); s != "" {
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("SLUICE_TEST_HA_SEED: %v", err)
		}
	}
	r := rand.New(rand.NewPCG(uint64(seed), 7))
	target := 400 + r.IntN(11_600)
	submitting := r.IntN(4) == 0
	if submitting {
		t.Logf("seed %d: the primary dies as the job is created, while ingest records its roots", seed)
	} else {
		t.Logf("seed %d: the primary dies at %d ingested items", seed, target)
	}
	var obs *pgx.Conn // the observer's connection, made again after an error
	defer func() {
		if obs != nil {
			obs.Close(context.Background())
		}
	}()
	count := func(q string) int {
		if obs == nil {
			c, err := pgx.Connect(ctx, url)
			if err != nil {
				return -1
			}
			obs = c
		}
		var n int
		if err := obs.QueryRow(ctx, q).Scan(&n); err != nil {
			obs.Close(context.Background())
			obs = nil
			return -1
		}
		return n
	}
	ingested := func() int { return count("SELECT count(*) FROM items WHERE state = 'ingested'") }
	var n int
	var counted time.Time
	poll.Until(t, 15*time.Minute, "the job under way", func() (bool, string) {
		select {
		case err := <-done:
			t.Fatalf("ingest ended before the failover (%v)\n%s", err, dump())
		default:
		}
		if submitting {
			jobs := count("SELECT count(*) FROM jobs")
			return jobs > 0, "no job yet"
		}
		if time.Since(counted) > 200*time.Millisecond { // a count of the items is not free
			n, counted = ingested(), time.Now()
		}
		return n >= target, fmt.Sprintf("%d items ingested", n)
	})
	if submitting {
		roots := count("SELECT count(*) FROM items WHERE parent_id = 0")
		t.Logf("the job's roots recorded at the kill: %d of %d", roots, len(files))
	}
	before := ingested()
	st0, _ := ha.states(ctx)
	t.Logf("formation before the kill: %v", st0)
	ha.kill(ha.primary())
	killed := time.Now()

	// Promotion: node2 accepts writes, and a write commits through the multi-host URL.
	poll.Until(t, 3*time.Minute, "the standby promoted", func() (bool, string) {
		st, err := ha.states(ctx)
		return writable(ctx, url), fmt.Sprint(st, err)
	})
	unavailable := time.Since(killed)
	t.Logf("primary killed at %d ingested items; writes commit again after %s", before, unavailable.Round(100*time.Millisecond))

	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ingest after the failover: %v\n%s", err, dump())
		}
	case <-time.After(20 * time.Minute):
		t.Fatalf("the job did not finish after the failover\n%s", dump())
	}
	t.Logf("the job finished %s after the kill", time.Since(killed).Round(time.Second))

	// Work run again: attempts that did not finish with the primary (lost leases, or finishes
	// whose commit the dead primary took with it).
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var lost, tasks, jobs int
	if err := c.QueryRow(ctx, `SELECT (SELECT count(*) FROM attempts WHERE error LIKE '%worker lost%'),
		(SELECT count(*) FROM tasks), (SELECT count(*) FROM jobs)`).Scan(&lost, &tasks, &jobs); err != nil {
		t.Fatal(err)
	}
	if jobs != 1 {
		t.Errorf("%d jobs after the failover, want the ingest's one", jobs)
	}
	t.Logf("work run again: %d of %d tasks lost an attempt to the failover", lost, tasks)

	ref := corpusReference()
	if ref.err != nil {
		t.Fatal(ref.err)
	}
	got, err := exportEnv(ctx, env, filepath.Join(dir, "export-data"), filepath.Join(dir, "export"), "text")
	if err != nil {
		t.Fatal(err)
	}
	compareExports(t, ref.ex, got, "after the failover")
	st, err := postgres.Open(ctx, postgres.Config{URL: url, SkipMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	checkSearchIndex(t, st)
	if !t.Failed() {
		t.Logf("failover at %d items: %d documents and %d errors identical to the uninterrupted run; %s without writes; %d attempts re-run",
			before, len(got.docs), len(got.errors), unavailable.Round(100*time.Millisecond), lost)
	}
}
