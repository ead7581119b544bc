package fileset

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/store/drivertest"
)

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// sluiceBinary builds the real binary once per test run.
func sluiceBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sluice-fileset-")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "sluice")
		out, err := exec.Command("go", "build", "-o", binary, "../../cmd/sluice").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("build sluice: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binary
}

// killRequests registers datasets of slow files (and two requests that download nothing) and
// writes their requests file.
func killRequests(t *testing.T, f *fakes, lie string) string {
	t.Helper()
	var lines []string
	for i := range 14 {
		var files []map[string]any
		for j := range 1 + 2*(i%2) {
			key := fmt.Sprintf("k%d/f%d.bin", i, j)
			files = append(files, f.file(key, content(key, 150_000+7_000*i+j), lie))
		}
		u := f.zenodoRecord(500+i, "open", files...)
		lines = append(lines, fmt.Sprintf(`{"ingest_type":"dataset","base_url":%q,"link_source":"kill","link_source_id":"%d"}`, u, i))
	}
	lines = append(lines, fmt.Sprintf(`{"ingest_type":"dataset","base_url":%q,"link_source_id":"404"}`, baseOf(f.zenodo)+"/record/9"),
		`{"ingest_type":"dataset","base_url":"http://localhost:1/x","link_source_id":"miss"}`)
	path := filepath.Join(t.TempDir(), "requests.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// resultLines reads a results file's request results (not its dataset-file results).
func resultLines(t *testing.T, path string) []Result {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []Result
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var r Result
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("result line %q: %v", line, err)
		}
		if req := string(r.Request); !strings.Contains(req, `"dataset-file"`) {
			out = append(out, r)
		}
	}
	return out
}

// normalResults reads a results file into comparable lines: per request, what does not
// depend on where or when it ran.
func normalResults(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var r Result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("result line %q: %v", sc.Text(), err)
		}
		var req Request
		_ = json.Unmarshal(r.Request, &req)
		// Each request's result, and its dataset-file result, are in the file once.
		if key := req.IngestType + " " + req.LinkSourceID; seen[key] {
			t.Errorf("%s: a second line for %s", path, key)
		} else {
			seen[key] = true
		}
		if req.IngestType == "dataset-file" {
			var fr FileResult
			_ = json.Unmarshal(sc.Bytes(), &fr)
			out = append(out, fmt.Sprintf("file %s %s %d %s", req.LinkSourceID, fr.Status, fr.FileMeta.Size, fr.FileMeta.SHA256))
			continue
		}
		line := fmt.Sprintf("%s %s %s %s", req.LinkSourceID, r.Status, r.IngestStrategy, r.PlatformID)
		if r.FilesetFile != nil {
			// A web-file success's capture: its CDX line, where its WARC record is.
			line += fmt.Sprintf(" captured:%v", r.FilesetFile.CDX != nil && r.FilesetFile.CDX.WarcPath != "" && r.FilesetFile.CDX.WarcOffset > 0)
		}
		for _, m := range r.Manifest {
			line += fmt.Sprintf(" [%s %d %s %s %s %s]", m.Path, *m.Size, m.Status, m.MD5, m.SHA1, m.SHA256)
		}
		out = append(out, line)
	}
	slices.Sort(out)
	return out
}

// TestKillDuringDownloads SIGKILLs `sluice fileset` three times while slow downloads are in
// flight and runs it again to the end, on each driver: its results equal an uninterrupted
// run's, no file is downloaded from its start to its end twice (interrupted downloads resume
// with ranges), every blob in the store is a verified file, and no partial file is left.
func TestKillDuringDownloads(t *testing.T) {
	t.Parallel()
	bin := sluiceBinary(t)
	drivertest.ForEach(t, func(t *testing.T, _ drivertest.Open) {
		t.Parallel()
		// dbArgs returns the flags of a store of its own: a new schema on PostgreSQL (the data
		// dir's SQLite file otherwise).
		dbArgs := func() []string {
			if !strings.HasSuffix(t.Name(), "/postgres") {
				return nil
			}
			url, schema := drivertest.DatabaseURL(t), drivertest.Schema(t)
			t.Cleanup(func() { drivertest.DropSchema(t, url, schema) })
			sep := "?"
			if strings.Contains(url, "?") {
				sep = "&"
			}
			return []string{"--database", url + sep + "sluice_schema=" + schema, "--lease", "2s"}
		}
		var db []string // the store of the run in question
		run := func(f *fakes, data, reqs, results string) *exec.Cmd {
			args := append([]string{"fileset", "--data", data, "--requests", reqs, "--results", results,
				"--platform", "zenodo=" + baseOf(f.zenodo), "--egress-allow", "localhost", "--host-delay", "0"}, db...)
			cmd := exec.CommandContext(t.Context(), bin, args...)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			return cmd
		}

		// The uninterrupted run, against fakes and a store of its own, served at full speed.
		db = dbArgs()
		clean := newFakes(t)
		cleanResults := filepath.Join(t.TempDir(), "clean.jsonl")
		published := filepath.Join(t.TempDir(), "published.jsonl")
		cmd := run(clean, t.TempDir(), killRequests(t, clean, ""), cleanResults)
		cmd.Args = append(cmd.Args, "--sink", "fileset=file:"+published)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("uninterrupted run: %v\n%s", err, out)
		}
		checkPublished(t, published, cleanResults)

		db = dbArgs()
		f := newFakes(t)
		reqs := killRequests(t, f, "slow")
		data := t.TempDir()
		results := filepath.Join(t.TempDir(), "results.jsonl")
		var total int64
		for _, ff := range f.files {
			total += int64(len(ff.body))
		}
		for kill := range 3 {
			f.mu.Lock()
			before := f.served
			f.mu.Unlock()
			cmd := run(f, data, reqs, results)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Kill once this run has received 400 KB: downloads are in flight. The first run is
			// killed once the results file also has the two requests that end without a
			// download: results are appended as requests end, not when the job does.
			poll.Until(t, time.Minute, fmt.Sprintf("run %d to download", kill), func() (bool, string) {
				lines := 0
				if kill == 0 {
					b, _ := os.ReadFile(results)
					lines = bytes.Count(b, []byte("\n"))
				}
				f.mu.Lock()
				defer f.mu.Unlock()
				return f.served-before >= 400_000 && (kill > 0 || lines >= 2),
					fmt.Sprintf("%d bytes served, %d result lines; output: %s", f.served-before, lines, out.String())
			})
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
		}
		if out, err := run(f, data, reqs, results).CombinedOutput(); err != nil {
			t.Fatalf("final run: %v\n%s", err, out)
		}

		// These runs had no sink named fileset: their job's workflow publishes nothing, so no
		// message waits in the outbox for a sink that is not there.
		{
			args := append([]string{"outbox", "status", "--json", "--data", data}, db...)
			args = slices.DeleteFunc(args, func(a string) bool { return a == "--lease" || a == "2s" })
			out, err := exec.CommandContext(t.Context(), bin, args...).Output()
			if err != nil {
				t.Fatalf("outbox status: %v\n%s", err, out)
			}
			var sinks []struct {
				Sink    string
				Pending int64
			}
			if err := json.Unmarshal(out, &sinks); err != nil {
				t.Fatalf("outbox status --json: %v\n%s", err, out)
			}
			for _, st := range sinks {
				if st.Pending != 0 {
					t.Errorf("outbox: %d messages pending for sink %q after runs without a sink", st.Pending, st.Sink)
				}
			}
		}

		// sluice fileset results lists the rows of ingest_fileset_platform: the 14 datasets, 7 of
		// one file, and the Zenodo record that is not there (its platform matched).
		for status, want := range map[string]int{"": 15, StatusSuccessFile: 7} {
			args := append([]string{"fileset", "results", "--data", data, "--output", "json", "--status", status}, db...)
			args = slices.DeleteFunc(args, func(a string) bool { return a == "--lease" || a == "2s" })
			out, err := exec.CommandContext(t.Context(), bin, args...).Output()
			if err != nil {
				t.Fatalf("fileset results: %v\n%s", err, out)
			}
			var rows []struct {
				BaseURL string `json:"base_url"`
				Result  Result
			}
			if err := json.Unmarshal(out, &rows); err != nil {
				t.Fatalf("fileset results --output json: %v\n%s", err, out)
			}
			if len(rows) != want {
				t.Errorf("fileset results --status %q: %d rows, want %d", status, len(rows), want)
			}
			for _, r := range rows {
				if r.Result.Hit != (r.Result.Status != StatusPlatform404) || r.Result.PlatformName != "zenodo" {
					t.Errorf("row %s: %+v", r.BaseURL, r.Result)
				}
			}
		}

		got, want := normalResults(t, results), normalResults(t, cleanResults)
		if !slices.Equal(got, want) {
			t.Errorf("results after kills differ from the uninterrupted run's:\n got %q\nwant %q", got, want)
		}
		for _, line := range got {
			if strings.Contains(line, " web-file ") && !strings.Contains(line, " captured:true") {
				t.Errorf("a web-file success without its capture: %s", line)
			}
		}
		// sluice fileset results --follow prints the newest fileset job's results (here, of a
		// job that has ended: all of them, and returns).
		{
			args := append([]string{"fileset", "results", "--follow", "--data", data}, db...)
			args = slices.DeleteFunc(args, func(a string) bool { return a == "--lease" || a == "2s" })
			out, err := exec.CommandContext(t.Context(), bin, args...).Output()
			if err != nil {
				t.Fatalf("fileset results --follow: %v\n%s", err, out)
			}
			followed := filepath.Join(t.TempDir(), "followed.jsonl")
			if err := os.WriteFile(followed, out, 0o644); err != nil {
				t.Fatal(err)
			}
			if f := normalResults(t, followed); !slices.Equal(f, got) {
				t.Errorf("fileset results --follow:\n got %q\nwant %q", f, got)
			}
		}
		f.mu.Lock()
		resumed := 0
		for key := range f.files {
			if f.fromZero[key] > 1 || f.completed[key] < 1 {
				t.Errorf("%s: served whole from its start %d times, to its end %d times", key, f.fromZero[key], f.completed[key])
			}
			resumed += f.ranged[key]
		}
		served := f.served
		f.mu.Unlock()
		if resumed == 0 {
			t.Errorf("no download resumed with a range after 3 kills")
		}
		t.Logf("%d bytes of files served for %d bytes of files; %d range requests", served, total, resumed)

		// The blob store holds verified files only; no partial file is left.
		verified := map[string]bool{}
		for _, line := range got {
			for _, part := range strings.Split(line, "[")[1:] {
				fields := strings.Fields(strings.TrimSuffix(strings.TrimSpace(part), "]"))
				verified[fields[len(fields)-1]] = true
			}
		}
		blobs, err := blob.OpenDir(filepath.Join(data, "blobs"), blob.DirOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// A capture of a download resumed after a kill records the head of the response its
		// first bytes came from: the server's 200 with the whole file's length, not a 206.
		// (Through the store as the CLI opens it: a capture of a compressible file is small.)
		all, err := blob.OpenDir(filepath.Join(data, "blobs"), blob.DirOptions{SmallMax: blob.DefaultSmallMax})
		if err != nil {
			t.Fatal(err)
		}
		defer all.Close()
		captured := 0
		for _, r := range resultLines(t, results) {
			if r.FilesetFile == nil || r.FilesetFile.CDX == nil {
				continue
			}
			cdx := *r.FilesetFile.CDX
			hdr, payload := readCapture(t, all, cdx)
			if cdx.StatusCode != 200 || hdr.Get("Content-Length") != strconv.Itoa(len(payload)) || hdr.Get("X-Fake-Server") == "" ||
				hdr.Get("Content-Range") != "" {
				t.Errorf("capture of %s: status %d, headers %v, for %d bytes", cdx.URL, cdx.StatusCode, hdr, len(payload))
			}
			captured++
		}
		if captured != 7 {
			t.Errorf("%d web-file captures read back, want 7", captured)
		}
		n := 0
		err = blobs.Walk(t.Context(), func(sha string, size int64, _ time.Time) error {
			n++
			if !verified[sha] {
				t.Errorf("blob %s (%d bytes) is not a verified file", sha, size)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if n != len(f.files) {
			t.Errorf("%d blobs for %d files", n, len(f.files))
		}
		checkNoPartials(t, filepath.Join(data, "fileset-partial"))
	})
}

// checkPublished checks that the sink received each request's result once (subject
// fileset.results, the result among the outputs) and each single-file success's dataset-file
// result (subject fileset.file-results).
func checkPublished(t *testing.T, published, results string) {
	t.Helper()
	b, err := os.ReadFile(published)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	bySubject := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m struct {
			ID      string
			Subject string
			Body    struct {
				Outputs  map[string]json.RawMessage
				Metadata map[string]json.RawMessage
			}
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("published line %q: %v", line, err)
		}
		if ids[m.ID] {
			continue // delivered again after a crash: the reader deduplicates by id
		}
		ids[m.ID] = true
		bySubject[m.Subject]++
		// A result step's message carries its outputs; the event's, the item's metadata.
		got := m.Body.Outputs[KindResult]
		if m.Subject == "fileset.file-results" {
			got = m.Body.Metadata[KindFileResult]
		}
		if len(got) == 0 {
			t.Errorf("message %s on %s carries no result: %s", m.ID, m.Subject, line)
		}
	}
	var requests, single int
	for _, line := range normalResults(t, results) {
		if strings.HasPrefix(line, "file ") {
			continue // a dataset-file result, beside its request's
		}
		requests++
		if strings.Contains(line, " success-file ") {
			single++
		}
	}
	if bySubject["fileset.results"] != requests || bySubject["fileset.file-results"] != single {
		t.Errorf("published %v, want %d results and %d dataset-file results", bySubject, requests, single)
	}
}
