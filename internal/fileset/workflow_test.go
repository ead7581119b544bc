package fileset

import (
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// startKit starts an engine and a worker with the fileset actions configured for the fakes.
func startKit(t *testing.T, open enginetest.Open, cfg Config) (*enginetest.Kit, *Fileset) {
	t.Helper()
	fs := New(cfg)
	k := enginetest.StartWith(t, open, enginetest.Config{Domains: map[string]engine.Domain{DomainName: Domain{}}},
		fs.Actions()...)
	return k, fs
}

// workflowSource is the fileset workflow the tests run: no politeness delay (the fakes' hosts
// are ours), publishing nothing (the kit has no sinks).
func workflowSource(t testing.TB) string {
	src, err := WorkflowSource(-1)
	if err != nil {
		t.Fatal(err)
	}
	return string(src)
}

// runRequests runs one job of the requests and returns their results by index.
func runRequests(t *testing.T, k *enginetest.Kit, reqs []Request, d time.Duration) (*record.Job, []Result) {
	t.Helper()
	roots := make([]engine.Root, len(reqs))
	for i, r := range reqs {
		roots[i] = engine.Root{Name: r.BaseURL, Metadata: map[string]any{"request": asMap(r)}}
	}
	job := k.StartJob(t, workflowSource(t), roots...)
	if j := k.WaitJob(t, job.ID, d); j.State != record.JobComplete {
		t.Fatalf("job %d %s: %s", j.ID, j.State, j.Error)
	}
	return job, jobResults(t, k, job.ID, len(reqs))
}

func jobResults(t *testing.T, k *enginetest.Kit, jobID int64, n int) []Result {
	t.Helper()
	zero := int64(0)
	ordinal := map[int64]int{}
	after := ""
	for {
		items, err := k.Store.ItemList(t.Context(), store.ItemListParams{JobID: jobID, ParentID: &zero, AfterSort: after, Limit: 5000})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			ordinal[it.ID] = it.Ordinal
		}
		if len(items) < 5000 {
			break
		}
		after = items[len(items)-1].SortKey
	}
	out := make([]Result, n)
	seen := 0
	var afterItem int64
	for {
		outs, err := k.Store.OutputList(t.Context(), store.OutputListParams{JobID: jobID, Kind: KindResult, AfterItem: afterItem, Limit: 5000})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range outs {
			i, ok := ordinal[o.ItemID]
			if !ok {
				t.Fatalf("result on item %d, not a root", o.ItemID)
			}
			if err := json.Unmarshal(o.Value, &out[i]); err != nil {
				t.Fatal(err)
			}
			seen++
		}
		if len(outs) < 5000 {
			break
		}
		afterItem = outs[len(outs)-1].ItemID
	}
	if seen != n {
		t.Fatalf("%d results for %d requests", seen, n)
	}
	return out
}

// statusCase is a request and the status it must end with.
type statusCase struct {
	name string
	url  string
	want string
}

// statusCases registers on the fakes a dataset or a lie for every status, and returns the
// requests that reach them.
func statusCases(f *fakes) []statusCase {
	z := func(id int, access string, files ...map[string]any) string {
		return f.zenodoRecord(id, access, files...)
	}
	honest := func(key string, n int) map[string]any { return f.file(key, content(key, n), "") }
	var cs []statusCase
	add := func(name, url, want string) { cs = append(cs, statusCase{name, url, want}) }

	add("zenodo fileset", z(100, "open", honest("z100/a.csv", 3000), honest("z100/b.csv", 5000)), StatusSuccess)
	add("zenodo single file", z(101, "open", honest("z101/only.txt", 2000)), StatusSuccessFile)

	figFiles := []map[string]any{}
	for i := range 3 {
		key := fmt.Sprintf("fig7/part%d.dat", i)
		m := honest(key, 1000+i)
		figFiles = append(figFiles, map[string]any{"id": i, "name": fmt.Sprintf("part%d.dat", i), "size": m["size"],
			"computed_md5": strings.TrimPrefix(m["checksum"].(string), "md5:"), "download_url": m["links"].(map[string]any)["self"]})
	}
	f.set(f.figArts, "7/2", map[string]any{"id": 7, "is_public": true, "files": figFiles})
	add("figshare with type", baseOf(f.figshare)+"/articles/dataset/Seven/7/2", StatusSuccess)
	f.set(f.figArts, "8/1", map[string]any{"id": 8, "is_public": false, "files": figFiles})
	add("figshare not public", baseOf(f.figshare)+"/articles/Eight/8/1", StatusPlatformRestricted)
	f.set(f.figArts, "9/1", map[string]any{"id": 9, "is_public": true, "is_link_only": true, "files": figFiles})
	add("figshare link only", baseOf(f.figshare)+"/articles/poster/Nine/9/1", StatusPlatformScope)
	add("figshare missing", baseOf(f.figshare)+"/articles/dataset/Ten/10/1", StatusPlatform404)
	add("figshare without version", baseOf(f.figshare)+"/articles/dataset/Seven/7", StatusNoPlatformMatch)
	f.set(f.figArts, "11/1", "not an article")
	add("figshare answers garbage", baseOf(f.figshare)+"/articles/dataset/Eleven/11/1", StatusPlatformError)

	dvFile := func(pid string, body []byte, original bool) map[string]any {
		f.mu.Lock()
		f.files["dv/"+pid] = &fakeFile{body: body}
		f.mu.Unlock()
		df := map[string]any{"id": 1, "persistentId": pid, "filename": "table.tab", "filesize": len(body) + 7, "md5": md5hex(body), "contentType": "text/tab-separated-values"}
		if original {
			df["originalFileName"], df["originalFileSize"], df["originalFileFormat"] = "table.csv", len(body), "text/csv"
		} else {
			df["filesize"] = len(body)
		}
		return map[string]any{"label": "table", "directoryLabel": "data", "dataFile": df}
	}
	f.set(f.dvSets, "doi:10.5072/FK2/AAAAAA", map[string]any{"versionNumber": 2, "versionMinorNumber": 1, "files": []any{
		dvFile("doi:10.5072/FK2/AAAAAA/F00001", content("dv1", 4000), true), dvFile("doi:10.5072/FK2/AAAAAA/F00002", content("dv2", 100), false)}})
	add("dataverse latest version", baseOf(f.dataverse)+"/dataset.xhtml?persistentId=doi:10.5072/FK2/AAAAAA", StatusSuccess)
	add("dataverse given version", baseOf(f.dataverse)+"/dataset.xhtml?persistentId=doi:10.5072/FK2/AAAAAA&version=2.1", StatusSuccess)
	add("dataverse file level", baseOf(f.dataverse)+"/file.xhtml?persistentId=doi:10.5072/FK2/AAAAAA/F00001", StatusPlatformScope)
	add("dataverse missing", baseOf(f.dataverse)+"/dataset.xhtml?persistentId=hdl:20.500.1/XYZ/BBBBBB", StatusPlatform404)
	f.set(f.dvSets, "doi:10.5072/FK2/CCCCCC", 500)
	add("dataverse http error", baseOf(f.dataverse)+"/dataset.xhtml?persistentId=doi:10.5072/FK2/CCCCCC", StatusPlatformHTTPError)

	iaFile := func(item, name string, body []byte, source string) map[string]any {
		f.mu.Lock()
		f.files["ia/"+item+"/"+name] = &fakeFile{body: body}
		f.mu.Unlock()
		return map[string]any{"name": name, "source": source, "size": fmt.Sprint(len(body)), "md5": md5hex(body), "sha1": sha1hex(body), "format": "Comma-Separated Values"}
	}
	f.set(f.iaItems, "item-two", map[string]any{"metadata": map[string]any{"identifier": "item-two", "collection": "x"}, "files": []any{
		iaFile("item-two", "a.csv", content("ia-a", 700), "original"), iaFile("item-two", "sub/b.csv", content("ia-b", 800), "original"),
		iaFile("item-two", "item-two_meta.xml", content("m", 10), "original"), iaFile("item-two", "item-two_archive.torrent", content("t", 10), "metadata"),
		iaFile("item-two", "a.png", content("d", 10), "derivative")}})
	add("archive.org item", baseOf(f.ia)+"/details/item-two", StatusSuccess)
	f.set(f.iaItems, "item-one", map[string]any{"metadata": map[string]any{"identifier": "item-one"}, "files": []any{
		iaFile("item-one", "one.csv", content("ia-one", 900), "original")}})
	add("archive.org single file", baseOf(f.ia)+"/download/item-one", StatusSuccessFile)
	add("archive.org file path", baseOf(f.ia)+"/details/item-one/one.csv", StatusPlatformScope)
	add("archive.org missing item", baseOf(f.ia)+"/details/no-such-item", StatusPlatform404)
	bad := iaFile("item-sha1", "s.csv", content("ia-s", 300), "original")
	bad["sha1"], bad["md5"] = sha1hex([]byte("other")), ""
	f.set(f.iaItems, "item-sha1", map[string]any{"metadata": map[string]any{"identifier": "item-sha1"}, "files": []any{bad}})
	add("archive.org wrong sha1", baseOf(f.ia)+"/details/item-sha1", StatusMismatchSHA1)

	add("zenodo missing", baseOf(f.zenodo)+"/record/404404", StatusPlatform404)
	f.set(f.zenodoRs, "503", 503)
	add("zenodo http error", baseOf(f.zenodo)+"/record/503", StatusPlatformHTTPError)
	f.set(f.zenodoRs, "410", 410)
	add("zenodo gone", baseOf(f.zenodo)+"/record/410", StatusPlatformRestricted)
	add("zenodo closed access", z(102, "closed", honest("z102/a", 10)), StatusPlatformRestricted)
	f.set(f.zenodoRs, "103", map[string]any{"id": 103, "conceptrecid": 103, "metadata": map[string]any{"access_right": "open"}})
	add("zenodo concept record", baseOf(f.zenodo)+"/record/103", StatusPlatformScope)
	add("empty manifest", z(104, "open"), StatusEmptyManifest)
	many := []map[string]any{}
	for i := range 201 {
		many = append(many, map[string]any{"key": fmt.Sprintf("f%d", i), "size": 1, "checksum": "md5:00", "links": map[string]any{"self": baseOf(f.web) + "/f/none"}})
	}
	add("too many files", z(105, "open", many...), StatusTooManyFiles)
	// Sizes of 50,000,000 and -49,999,000 bytes summed to 1,000, under any limit: a negative
	// size is refused before a byte is downloaded.
	add("negative size", z(119, "open", map[string]any{"key": "big", "size": 50_000_000, "links": map[string]any{"self": baseOf(f.web) + "/f/none"}},
		map[string]any{"key": "neg", "size": -49_999_000, "links": map[string]any{"self": baseOf(f.web) + "/f/none"}}), StatusPlatformError)
	add("implausible size", z(120, "open", map[string]any{"key": "a", "size": int64(math.MaxInt64), "links": map[string]any{"self": baseOf(f.web) + "/f/none"}},
		map[string]any{"key": "b", "size": 1, "links": map[string]any{"self": baseOf(f.web) + "/f/none"}}), StatusPlatformError)
	add("too large", z(106, "open", map[string]any{"key": "huge", "size": int64(65) << 30, "links": map[string]any{"self": baseOf(f.web) + "/f/none"}}), StatusTooLargeSize)

	wrongSize := honest("z107/a", 1000)
	wrongSize["size"] = 1010
	add("wrong size", z(107, "open", wrongSize), StatusMismatchSize)
	wrongMD5 := honest("z108/a", 1000)
	wrongMD5["checksum"] = "md5:" + md5hex([]byte("something else"))
	add("wrong md5", z(108, "open", honest("z108/ok", 10), wrongMD5), StatusMismatchMD5)
	wrongSHA256 := honest("z109/a", 1000)
	wrongSHA256["checksum"] = "sha256:" + strings.Repeat("ab", 32)
	add("wrong sha256", z(109, "open", wrongSHA256), StatusMismatchSHA256)
	add("truncated body", z(110, "open", f.file("z110/a", content("t", 20000), "truncate")), StatusErrorPlatformDownload)
	add("infinite body", z(111, "open", f.file("z111/a", content("i", 5000), "infinite")), StatusMismatchSize)
	add("file redirect loop", z(112, "open", f.file("z112/a", content("l", 50), "loop")), StatusRedirectLoop)
	add("file redirected to loopback", z(113, "open", f.file("z113/a", content("b", 50), "to-loopback")), StatusBadRedirect)
	unsafe := honest("z114/a", 10)
	unsafe["key"] = "../../etc/passwd"
	add("unsafe path", z(114, "open", honest("z114/ok", 10), unsafe), StatusUnsafePath)
	missing := honest("z115/a", 10)
	missing["links"] = map[string]any{"self": baseOf(f.web) + "/f/not-there"}
	add("file 404", z(115, "open", missing), StatusTerminalBadStatus)
	empty := f.file("z116/a", nil, "")
	delete(empty, "size")
	empty["checksum"] = ""
	add("empty body", z(116, "open", empty), StatusEmptyBlob)

	endless := f.file("z118/a", nil, "infinite")
	delete(endless, "size")
	endless["checksum"] = ""
	add("endless body without a size", z(118, "open", endless), StatusBodyTooLarge)

	// Over 20 files: the record's files-archive, one download, its files verified inside.
	var bundle, lyingBundle []map[string]any
	for i := range 21 {
		bundle = append(bundle, honest(fmt.Sprintf("z130/f%02d.csv", i), 100+i))
		lyingBundle = append(lyingBundle, honest(fmt.Sprintf("z131/f%02d.csv", i), 100+i))
	}
	add("bundled", z(130, "open", bundle...), StatusSuccess)
	f.mu.Lock()
	f.files["lie/z131/f07.csv"] = &fakeFile{body: content("other", 107)} // same size, other bytes
	f.mu.Unlock()
	add("bundle with a wrong file", z(131, "open", lyingBundle...), StatusMismatchMD5)

	add("landing unreachable", "http://localhost:1/record/1", StatusNoCapture)
	f.set2(f.landing, "/record/117", 404)
	add("landing 404", baseOf(f.zenodo)+"/record/117", StatusTerminalBadStatus)
	add("landing redirect loop", baseOf(f.web)+"/loop-a", StatusRedirectLoop)
	add("too many redirects", baseOf(f.web)+"/chain/0", StatusRedirectsExceeded)
	add("landing on loopback address", strings.Replace(baseOf(f.web), "localhost", "127.0.0.1", 1)+"/page", StatusSkipURLBlocklist)
	add("not http", "ftp://example.com/data", StatusSkipURLBlocklist)
	add("no platform", baseOf(f.web)+"/some/page", StatusNoPlatformMatch)
	return cs
}

func (f *fakes) set2(m map[string]int, k string, v int) {
	f.mu.Lock()
	m[k] = v
	f.mu.Unlock()
}

// TestStatuses drives every status of the vocabulary through the workflow against the fakes,
// each asserted by name, on each store driver.
func TestStatuses(t *testing.T) {
	t.Parallel()
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		f := newFakes(t)
		cs := statusCases(f)
		cfg := f.config(t)
		cfg.MaxFileSize = 1 << 20 // bounds a file the manifest gives no size
		k, _ := startKit(t, open, cfg)
		reqs := make([]Request, len(cs))
		for i, c := range cs {
			reqs[i] = Request{IngestType: "dataset", BaseURL: c.url, LinkSource: "test", LinkSourceID: c.name}
		}
		job, results := runRequests(t, k, reqs, time.Minute)
		for i, c := range cs {
			r := results[i]
			if r.Status != c.want {
				t.Errorf("%s (%s): status %q (%s), want %q", c.name, c.url, r.Status, r.ErrorMessage, c.want)
			}
			if r.Hit != strings.HasPrefix(c.want, "success") {
				t.Errorf("%s: hit %v", c.name, r.Hit)
			}
			if len(r.ErrorMessage) > MaxErrorLen || c.name == "zenodo http error" && !strings.HasSuffix(r.ErrorMessage, fmt.Sprintf("(%d more bytes)", 5501-maxQuoted)) {
				t.Errorf("%s: error of %d chars %q (at most %d; a long body's is quoted only at its start)", c.name, len(r.ErrorMessage), r.ErrorMessage, MaxErrorLen)
			}
			var req Request
			if err := json.Unmarshal(r.Request, &req); err != nil || req.LinkSourceID != c.name {
				t.Errorf("%s: result's request %s", c.name, r.Request)
			}
			if strings.HasPrefix(r.Status, "success") {
				checkSuccess(t, c.name, r)
			}
			checkFields(t, c, r)
		}
		// ingest_fileset_platform holds exactly the requests whose platform was identified.
		rows, err := NewResultStore(k.Store).List(t.Context(), ListParams{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		byURL := map[string]Row{}
		for _, r := range rows {
			byURL[r.BaseURL] = r
		}
		for i, c := range cs {
			row, ok := byURL[c.url]
			if (results[i].PlatformName != "") != ok {
				t.Errorf("%s: platform %q, row in ingest_fileset_platform %v", c.name, results[i].PlatformName, ok)
			}
			if ok && row.Status != c.want {
				t.Errorf("%s: row status %q", c.name, row.Status)
			}
		}
		// A single-file success also has its dataset-file result.
		outs, err := k.Store.OutputList(t.Context(), store.OutputListParams{JobID: job.ID, Kind: KindFileResult, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		wantFiles := 0
		for _, c := range cs {
			if c.want == StatusSuccessFile {
				wantFiles++
			}
		}
		if len(outs) != wantFiles {
			t.Errorf("%d dataset-file results, want %d", len(outs), wantFiles)
		}
		for _, o := range outs {
			var fr FileResult
			var req Request
			if err := json.Unmarshal(o.Value, &fr); err != nil || json.Unmarshal(fr.Request, &req) != nil || req.IngestType != "dataset-file" ||
				req.LinkSource != "test" || !fr.Hit || len(fr.FileMeta.SHA256) != 64 || fr.Terminal == nil || fr.Terminal.SHA1 != fr.FileMeta.SHA1 {
				t.Errorf("dataset-file result %s", o.Value)
			}
		}
		// Each file of a web-* success was captured: the CDX index has its line, whose WARC —
		// read back by internetarchive/gowarc — holds the file; web-file results carry it. A
		// bundle was captured once, its files downloaded by none but it.
		results2 := NewResultStore(k.Store)
		captures := 0
		for i, c := range cs {
			r := results[i]
			if bundled(r.IngestStrategy) {
				checkBundle(t, c, r, f, k, results2)
				continue
			}
			if !strings.HasPrefix(r.Status, "success") || !strings.HasPrefix(r.IngestStrategy, "web-") {
				continue
			}
			for _, m := range r.Manifest {
				cdx, err := results2.CDX(t.Context(), m.TerminalURL, m.SHA1)
				if err != nil {
					t.Errorf("%s: %s has no CDX line: %v", c.name, m.Path, err)
					continue
				}
				if hdr, payload := readCapture(t, k.Blobs, *cdx); int64(len(payload)) != *m.Size || cdx.SURT != SURT(m.TerminalURL) ||
					cdx.StatusCode != 200 || !strings.HasPrefix(hdr.Get("X-Fake-Server"), "fileset-fake ") {
					t.Errorf("%s: %s captured as %d bytes with headers %v, %+v; want the server's", c.name, m.Path, len(payload), hdr, cdx)
				}
				captures++
				if r.IngestStrategy == StrategyWebFile && (r.FilesetFile == nil || r.FilesetFile.CDX == nil || *r.FilesetFile.CDX != *cdx) {
					t.Errorf("%s: fileset_file %+v, want its CDX line %+v", c.name, r.FilesetFile, cdx)
				}
			}
		}
		if captures < 8 {
			t.Errorf("%d captures read back", captures)
		}
		// Each landing page that answered was captured: the result's file_meta and cdx are its
		// body's and its WARC's (read back), terminal_sha1hex its sha1, the WARC kept by the
		// CDX index for the blob collector.
		landings := 0
		for i, c := range cs {
			r := results[i]
			if r.Terminal == nil || r.Terminal.StatusCode >= 400 {
				if r.FileMeta != nil || r.CDX != nil {
					t.Errorf("%s: file_meta %+v, cdx %+v without a landing page", c.name, r.FileMeta, r.CDX)
				}
				continue
			}
			if r.FileMeta == nil || r.CDX == nil {
				t.Errorf("%s: landing page %s answered %d: file_meta %+v, cdx %+v", c.name, r.Terminal.URL, r.Terminal.StatusCode, r.FileMeta, r.CDX)
				continue
			}
			hdr, payload := readCapture(t, k.Blobs, *r.CDX)
			sum := sha1.Sum(payload)
			if int64(len(payload)) != r.FileMeta.Size || hex.EncodeToString(sum[:]) != r.FileMeta.SHA1 || r.CDX.URL != r.Terminal.URL ||
				r.CDX.StatusCode != r.Terminal.StatusCode || r.Terminal.SHA1 != r.FileMeta.SHA1 || r.FileMeta.Mimetype != "text/html" ||
				!strings.HasPrefix(hdr.Get("Content-Type"), "text/html") {
				t.Errorf("%s: landing capture of %d bytes (headers %v); result's terminal %+v, file_meta %+v, cdx %+v",
					c.name, len(payload), hdr, r.Terminal, r.FileMeta, r.CDX)
			}
			if got, err := results2.CDX(t.Context(), r.CDX.URL, r.FileMeta.SHA1); err != nil || *got != *r.CDX {
				t.Errorf("%s: the landing page's CDX line %+v, %v; result's %+v", c.name, got, err, r.CDX)
			}
			if ok, err := (Domain{}).BlobReferenced(t.Context(), k.Store.DomainSQL(), r.CDX.WarcPath); !ok || err != nil {
				t.Errorf("%s: the landing page's WARC is not kept for the collector: %v", c.name, err)
			}
			landings++
		}
		if landings < len(cs)/2 {
			t.Errorf("%d landing pages captured of %d requests", landings, len(cs))
		}
		// Each archiveorg-* success wrote its item folder.
		folders := 0
		for i, c := range cs {
			if r := results[i]; strings.HasPrefix(r.Status, "success") && strings.HasPrefix(r.IngestStrategy, "archiveorg-") {
				checkItemFolder(t, c.name, r, k, results2)
				folders++
			}
		}
		if folders < 2 {
			t.Errorf("%d archive.org item folders checked", folders)
		}
		// Downloads left no partial files behind.
		checkNoPartials(t, cfg.PartialDir)
	})
}

// checkSuccess checks a success's manifest: every file verified, hashes filled in, its blob
// in the store.
func checkSuccess(t *testing.T, name string, r Result) {
	t.Helper()
	if r.Status == StatusSuccessExisting {
		return
	}
	if r.FileCount == nil || *r.FileCount != len(r.Manifest) || r.TotalSize == nil {
		t.Errorf("%s: file_count %v for %d files", name, r.FileCount, len(r.Manifest))
	}
	var total int64
	for _, m := range r.Manifest {
		if m.Status != StatusSuccess || len(m.SHA256) != 64 || len(m.SHA1) != 40 || len(m.MD5) != 32 || m.Size == nil || m.Mimetype == "" {
			t.Errorf("%s: manifest file %+v", name, m)
		}
		if m.Size != nil {
			total += *m.Size
		}
	}
	if r.TotalSize != nil && *r.TotalSize != total {
		t.Errorf("%s: total_size %d, files sum to %d", name, *r.TotalSize, total)
	}
	if (r.Status == StatusSuccessFile) != (r.FilesetFile != nil) {
		t.Errorf("%s: fileset_file %+v with status %s", name, r.FilesetFile, r.Status)
	}
}

// checkNoPartials checks that no download left its partial file behind.
func checkNoPartials(t *testing.T, dir string) {
	t.Helper()
	left, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("partial file left: %s", e.Name())
	}
}

// landingStops are the cases whose request ends before a platform is tried: no platform fields.
var landingStops = map[string]bool{"landing unreachable": true, "landing 404": true, "landing redirect loop": true,
	"too many redirects": true, "landing on loopback address": true, "not http": true, "no platform": true,
	"figshare without version": true, "outside the paths": true, "a path that only starts like one": true}

// checkFields checks the fields the design's result schema names, by status: the platform's
// whenever one matched, counts and a manifest once it was read, archiveorg_item_name only for
// an archiveorg-* strategy, html_biblio from a landing page that has citation tags.
func checkFields(t *testing.T, c statusCase, r Result) {
	t.Helper()
	if landingStops[c.name] {
		if r.PlatformName != "" || r.PlatformDomain != "" || r.PlatformID != "" {
			t.Errorf("%s: platform %q %q %q, want none", c.name, r.PlatformName, r.PlatformDomain, r.PlatformID)
		}
	} else if r.PlatformName == "" || r.PlatformDomain == "" || r.PlatformID == "" || r.PlatformBaseURL == "" {
		t.Errorf("%s (%s): platform_name %q, platform_domain %q, platform_id %q, platform_base_url %q: want all",
			c.name, r.Status, r.PlatformName, r.PlatformDomain, r.PlatformID, r.PlatformBaseURL)
	}
	if (r.ArchiveorgItemName != "") != strings.HasPrefix(r.IngestStrategy, "archiveorg-") {
		t.Errorf("%s: archiveorg_item_name %q with strategy %q", c.name, r.ArchiveorgItemName, r.IngestStrategy)
	}
	if c.want == StatusEmptyManifest {
		b, _ := json.Marshal(r)
		if r.FileCount == nil || *r.FileCount != 0 || r.TotalSize == nil || *r.TotalSize != 0 || !strings.Contains(string(b), `"manifest":[]`) {
			t.Errorf("%s: file_count %v, total_size %v, JSON %s: want 0, 0 and an empty manifest", c.name, r.FileCount, r.TotalSize, b)
		}
	}
	if r.Terminal != nil && r.Terminal.StatusCode == 200 && c.name != "not http" {
		path := r.Terminal.URL[strings.Index(r.Terminal.URL[len("http://"):], "/")+len("http://"):]
		if i := strings.IndexByte(path, '?'); i >= 0 {
			path = path[:i]
		}
		// The page names its own path (behind a mirror's path prefix, the path the fake saw).
		if r.HTMLBiblio != nil {
			if seen := strings.TrimPrefix(r.HTMLBiblio.Title, "Dataset at "); seen != "" && strings.HasSuffix(path, seen) {
				path = seen
			}
		}
		want := HTMLBiblio{Title: "Dataset at " + path, ContribNames: []string{"Ada Lovelace", "Grace Hopper"},
			ReleaseDate: "2021-03-04", DOI: "10.5072/" + strings.Trim(path, "/")}
		if r.HTMLBiblio == nil || !reflect.DeepEqual(*r.HTMLBiblio, want) {
			t.Errorf("%s: html_biblio %+v, want %+v", c.name, r.HTMLBiblio, want)
		}
	}
}

// checkBundle checks a bundled result: its strategy, its bundle captured once (read back from
// its WARC), no file of it fetched alone, and its manifest verified inside the bundle.
func checkBundle(t *testing.T, c statusCase, r Result, f *fakes, k *enginetest.Kit, results *ResultStore) {
	t.Helper()
	b := r.FilesetBundle
	if r.IngestStrategy != StrategyWebFilesetBundled || b == nil || b.CDX == nil || b.Terminal == nil || b.FileMeta.Size == 0 {
		t.Errorf("%s: strategy %s, fileset_bundle %+v", c.name, r.IngestStrategy, b)
		return
	}
	cdx, err := results.CDX(t.Context(), b.Terminal.URL, b.FileMeta.SHA1)
	if err != nil || *cdx != *b.CDX {
		t.Errorf("%s: the bundle's CDX line %+v, %v; result's %+v", c.name, cdx, err, b.CDX)
	} else if _, payload := readCapture(t, k.Blobs, *cdx); int64(len(payload)) != b.FileMeta.Size {
		t.Errorf("%s: bundle captured as %d bytes, downloaded %d", c.name, len(payload), b.FileMeta.Size)
	}
	if len(r.Manifest) != 21 || *r.FileCount != 21 {
		t.Errorf("%s: %d manifest files", c.name, len(r.Manifest))
	}
	for _, m := range r.Manifest {
		if f.getCount(m.Path) != 0 {
			t.Errorf("%s: %s was fetched alone", c.name, m.Path)
		}
		want := StatusSuccess
		if strings.HasSuffix(m.Path, "z131/f07.csv") {
			want = StatusMismatchMD5
		}
		if m.Status != want || want == StatusSuccess && (len(m.SHA256) != 64 || m.TerminalURL != b.Terminal.URL) {
			t.Errorf("%s: manifest file %+v, want %s", c.name, m, want)
		}
	}
}

// checkItemFolder checks an archiveorg-* success's item folder: its rows name the manifest's
// files and ITEM_meta.xml and ITEM_files.xml, each in the blob store and kept by the blob
// collector; _files.xml lists every file but itself with its size and digests, _meta.xml the
// item's identifier and the platform's metadata.
func checkItemFolder(t *testing.T, name string, r Result, k *enginetest.Kit, results *ResultStore) {
	t.Helper()
	item := r.ArchiveorgItemName
	files, err := results.ItemFiles(t.Context(), item)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]ItemFile{}
	for _, f := range files {
		byName[f.Name] = f
		if ok, err := (Domain{}).BlobReferenced(t.Context(), k.Store.DomainSQL(), f.SHA256); !ok || err != nil {
			t.Errorf("%s: blob of %s/%s not referenced for the collector: %v", name, item, f.Name, err)
		}
		if size, err := k.Blobs.Stat(t.Context(), f.SHA256); err != nil || size != f.Size {
			t.Errorf("%s: blob of %s/%s: %d bytes, %v; want %d", name, item, f.Name, size, err, f.Size)
		}
	}
	if len(files) != len(r.Manifest)+2 {
		t.Errorf("%s: item %s has %d files for a manifest of %d: %+v", name, item, len(files), len(r.Manifest), files)
	}
	read := func(file string) []byte {
		f, ok := byName[file]
		if !ok {
			t.Errorf("%s: item %s has no %s", name, item, file)
			return nil
		}
		rc, err := k.Blobs.Open(t.Context(), f.SHA256)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var listed struct {
		Files []struct {
			Name   string `xml:"name,attr"`
			Source string `xml:"source,attr"`
			Size   int64  `xml:"size"`
			MD5    string `xml:"md5"`
			SHA1   string `xml:"sha1"`
			Format string `xml:"format"`
		} `xml:"file"`
	}
	if err := xml.Unmarshal(read(item+"_files.xml"), &listed); err != nil {
		t.Errorf("%s: %s_files.xml: %v", name, item, err)
	}
	want := map[string]ManifestFile{}
	for _, m := range r.Manifest {
		want[m.Path] = m
	}
	for _, f := range listed.Files {
		if f.Name == item+"_meta.xml" {
			if f.Source != "metadata" || f.Format != "Metadata" || f.Size != byName[f.Name].Size {
				t.Errorf("%s: _files.xml lists %+v", name, f)
			}
			continue
		}
		m, ok := want[f.Name]
		if !ok || f.Source != "original" || m.Size == nil || f.Size != *m.Size || f.MD5 != m.MD5 || f.SHA1 != m.SHA1 ||
			byName[f.Name].SHA256 != m.SHA256 {
			t.Errorf("%s: _files.xml lists %+v; manifest %+v", name, f, m)
		}
		delete(want, f.Name)
	}
	if len(want) > 0 || len(listed.Files) != len(r.Manifest)+1 {
		t.Errorf("%s: _files.xml lists %d files, misses %v", name, len(listed.Files), want)
	}
	var meta struct {
		Identifier string   `xml:"identifier"`
		Collection []string `xml:"collection"`
	}
	if err := xml.Unmarshal(read(item+"_meta.xml"), &meta); err != nil || meta.Identifier != item || len(meta.Collection) == 0 {
		t.Errorf("%s: %s_meta.xml: %+v, %v", name, item, meta, err)
	}
}
