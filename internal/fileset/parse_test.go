package fileset

import (
	"fmt"
	"math"
	"net/url"
	"slices"
	"strings"
	"testing"
)

func TestParsePersistentID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in                            string
		ok                                  bool
		shoulder, dataset, file, datasetPID string
	}{
		{"doi with shoulder", "doi:10.7910/DVN/ABC123", true, "DVN", "ABC123", "", "doi:10.7910/DVN/ABC123"},
		{"doi file level", "doi:10.5072/FK2/QW12ER/ZX98CV", true, "FK2", "QW12ER", "ZX98CV", "doi:10.5072/FK2/QW12ER"},
		{"doi no shoulder", "doi:10.12345/AB12CD", true, "", "AB12CD", "", "doi:10.12345/AB12CD"},
		{"handle", "hdl:20.500.11111/XYZ/QQQ111/RRR222", true, "XYZ", "QQQ111", "RRR222", "hdl:20.500.11111/XYZ/QQQ111"},
		{"handle dataset", "hdl:20.500.11111/XYZ/QQQ111", true, "XYZ", "QQQ111", "", "hdl:20.500.11111/XYZ/QQQ111"},
		{"empty", "", false, "", "", "", ""},
		{"no type", "10.7910/DVN/ABC123", false, "", "", "", ""},
		{"ark is not handled", "ark:/13030/tf5p30086k", false, "", "", "", ""},
		{"doi authority not 10.", "doi:11.7910/DVN/ABC123", false, "", "", "", ""},
		{"authority only", "doi:10.7910", false, "", "", "", ""},
		{"dataset id too short", "doi:10.7910/DVN/ABC12", false, "", "", "", ""},
		{"dataset id punctuation", "doi:10.7910/DVN/AB-123", false, "", "", "", ""},
		{"too many segments", "doi:10.7910/DVN/ABC123/DEF456/GHI789", false, "", "", "", ""},
		{"file id too long", "doi:10.7910/DVN/ABC123/DEF4567", false, "", "", "", ""},
		{"empty segment", "doi:10.7910//ABC123", false, "", "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParsePersistentID(tc.in)
			if (err == nil) != tc.ok {
				t.Fatalf("ParsePersistentID(%q) = %+v, %v; want ok=%v", tc.in, p, err, tc.ok)
			}
			if !tc.ok {
				return
			}
			if p.Shoulder != tc.shoulder || p.DatasetID != tc.dataset || p.FileID != tc.file || p.Dataset() != tc.datasetPID {
				t.Errorf("ParsePersistentID(%q) = %+v (dataset %s)", tc.in, p, p.Dataset())
			}
		})
	}
}

func TestParseFigsharePath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in, id, version string
	}{
		{"slug id version", "/articles/Some_protocol_for_samples/8987858/1", "8987858", "1"},
		{"type dataset", "/articles/dataset/Table_1_analyses_xls/12127176/4", "12127176", "4"},
		{"type journal_contribution", "/articles/journal_contribution/Better_timing/1414053/1", "1414053", "1"},
		{"type poster", "/articles/poster/Effects_of_things/11960085/2", "11960085", "2"},
		{"trailing slash", "/articles/dataset/x/5/3/", "5", "3"},
		{"no version", "/articles/Some_protocol_for_samples/8987858", "", ""},
		{"type without version", "/articles/dataset/Table_1_analyses_xls/12127176", "", ""},
		{"not articles", "/projects/thing/123/1", "", ""},
		{"version not a number", "/articles/dataset/x/123/v1", "", ""},
		{"id not a number", "/articles/dataset/x/abc/1", "", ""},
		{"too deep", "/articles/a/b/c/123/1", "", ""},
		{"empty", "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, v, err := ParseFigsharePath(tc.in)
			if (err == nil) != (tc.id != "") || id != tc.id || v != tc.version {
				t.Fatalf("ParseFigsharePath(%q) = %q, %q, %v; want %q, %q", tc.in, id, v, err, tc.id, tc.version)
			}
		})
	}
}

// TestPlatformMatch checks which platform claims which landing URL, in the workflow's order.
func TestPlatformMatch(t *testing.T) {
	t.Parallel()
	p := Platforms{}.withDefaults()
	for _, tc := range []struct{ url, want string }{
		{"https://dataverse.harvard.edu/dataset.xhtml?persistentId=doi:10.7910/DVN/ABC123", "dataverse"},
		{"https://demo.dataverse.org/dataset.xhtml?persistentId=hdl:20.500.1/XYZ/QQQ111&version=2.0", "dataverse"},
		// Not a known installation: any server can answer a persistentId URL.
		{"https://data.example.edu/dataset.xhtml?persistentId=hdl:20.500.1/XYZ/QQQ111&version=2.0", ""},
		{"https://data.example.edu/dataset.xhtml?persistentId=doi:10.7910/DVN/bad", ""},
		{"https://figshare.com/articles/dataset/x/12127176/4", "figshare"},
		{"https://springernature.figshare.com/articles/dataset/x/12127176/4", "figshare"},
		{"https://figshare.com/articles/dataset/x/12127176", ""},
		{"https://notfigshare.com/articles/dataset/x/12127176/4", ""},
		{"https://zenodo.org/record/5555", "zenodo"},
		{"https://zenodo.org/records/5555", "zenodo"},
		{"https://zenodo.org/communities/x", ""},
		{"https://archive.org/details/some_item", "archiveorg"},
		{"https://archive.org/download/some_item/file.pdf", "archiveorg"},
		{"https://archive.org/search?query=x", ""},
		{"https://example.com/dataset/1", ""},
	} {
		u, _ := url.Parse(tc.url)
		got := ""
		for _, name := range PlatformNames {
			pl, _ := p.platform(name)
			if _, ok := pl.match(u); ok {
				got = name
				break
			}
		}
		if got != tc.want {
			t.Errorf("%s: matched %q, want %q", tc.url, got, tc.want)
		}
	}
	anyHost, _ := (Platforms{"dataverse": {Hosts: []string{"*"}}}).withDefaults().platform("dataverse")
	if u, _ := url.Parse("https://data.example.edu/dataset.xhtml?persistentId=doi:10.7910/DVN/ABC123"); !matches(anyHost, u) {
		t.Errorf(`dataverse hosts "*" do not match %s`, u)
	}
}

// TestManifestSizes: negative sizes are refused, sums that overflow are over any limit, and a
// manifest's files without a size share what the declared sizes leave of the limit.
func TestManifestSizes(t *testing.T) {
	t.Parallel()
	sized := func(sizes ...int64) []ManifestFile {
		var out []ManifestFile
		for i, s := range sizes {
			out = append(out, ManifestFile{Path: fmt.Sprintf("f%d", i), Size: int64p(s)})
		}
		return out
	}
	l := Limits{MaxTotalSize: 1 << 20}.withDefaults()
	for _, tc := range []struct {
		name     string
		manifest []ManifestFile
		status   string
		msg      string
	}{
		// The reported manifest: 50,000,000 and -49,999,000 summed to 1,000 under a 1 MiB cap.
		{"negative size", sized(50_000_000, -49_999_000), StatusPlatformError, `manifest file "f1" has a negative size (-49999000 bytes)`},
		{"implausible size", sized(math.MaxInt64), StatusPlatformError, "more than any file can have"},
		{"overflow", sized(slices.Repeat([]int64{maxDeclaredSize}, 1025)...), StatusTooLargeSize, "over the limit of 1048576"},
		{"fits", sized(1000, 2000), "", ""},
	} {
		st, msg := l.check(&PlatformItem{Manifest: tc.manifest})
		if st != tc.status || !strings.Contains(msg, tc.msg) {
			t.Errorf("%s: check = %q, %q; want %q, %q", tc.name, st, msg, tc.status, tc.msg)
		}
	}
	m := append(sized(1000), ManifestFile{Path: "a"}, ManifestFile{Path: "b"})
	if got := unsizedBudget(m, 3000); got != 1000 {
		t.Errorf("unsized budget %d, want 1000", got)
	}
	if got := unsizedBudget(sized(5000), 3000); got != 0 {
		t.Errorf("unsized budget of a sized manifest %d, want 0", got)
	}
}

func TestChooseStrategyAndLimits(t *testing.T) {
	t.Parallel()
	files := func(sizes ...int64) []ManifestFile {
		var out []ManifestFile
		for _, s := range sizes {
			out = append(out, ManifestFile{Path: "f", Size: int64p(s)})
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		item     PlatformItem
		strategy string
	}{
		{"one small", PlatformItem{PlatformName: "zenodo", Manifest: files(10)}, StrategyWebFile},
		{"one large", PlatformItem{PlatformName: "zenodo", Manifest: files(64 << 20)}, StrategyArchiveorgFile},
		{"several small", PlatformItem{PlatformName: "figshare", Manifest: files(10, 20)}, StrategyWebFileset},
		{"several, one large", PlatformItem{PlatformName: "figshare", Manifest: files(10, 64<<20)}, StrategyArchiveorgFileset},
		{"archive.org one", PlatformItem{PlatformName: "archiveorg", Manifest: files(10)}, StrategyArchiveorgFile},
		{"archive.org several", PlatformItem{PlatformName: "archiveorg", Manifest: files(10, 10)}, StrategyArchiveorgFileset},
	} {
		if got := ChooseStrategy(&tc.item); got != tc.strategy {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.strategy)
		}
	}
	l := Limits{MaxFileCount: 2, MaxTotalSize: 100, MaxManifest: 5}.withDefaults()
	for _, tc := range []struct {
		name  string
		sizes []int64
		want  string
	}{
		{"empty", nil, StatusEmptyManifest},
		{"fits", []int64{50, 50}, ""},
		{"too large", []int64{60, 50}, StatusTooLargeSize},
		{"too many", []int64{1, 1, 1}, StatusTooManyFiles},
		{"truncated", []int64{1, 1, 1, 1, 1, 1, 1}, StatusTooManyFiles},
	} {
		it := PlatformItem{Manifest: files(tc.sizes...)}
		l.truncate(&it)
		if st, _ := l.check(&it); st != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, st, tc.want)
		}
		if len(tc.sizes) > 5 && (len(it.Manifest) != 2 || it.ManifestTruncated != len(tc.sizes)) {
			t.Errorf("%s: manifest of %d kept %d (truncated %d), want 2", tc.name, len(tc.sizes), len(it.Manifest), it.ManifestTruncated)
		}
	}
}

func TestSafePath(t *testing.T) {
	t.Parallel()
	for p, want := range map[string]bool{"a.csv": true, "dir/a.csv": true, "..a": true,
		"": false, "/etc/passwd": false, "../x": false, "a/../../x": false, "a\x00b": false, `a\b`: false, "./a": false} {
		if SafePath(p) != want {
			t.Errorf("SafePath(%q) = %v", p, !want)
		}
	}
	if got := capError(string(make([]byte, 5000))); len(got) != MaxErrorLen {
		t.Errorf("capError: %d chars", len(got))
	}
}

// TestPlatformsServe: a platform served at a URL (--platform NAME=URL) has that host and its
// API at the platform's path under the URL; an unknown name is refused.
func TestPlatformsServe(t *testing.T) {
	t.Parallel()
	var p Platforms
	for _, name := range PlatformNames {
		u, _ := url.Parse("http://mirror-" + name + ":8080/")
		if err := p.Serve(name, u); err != nil {
			t.Fatal(err)
		}
	}
	want := Platforms{
		"dataverse":  {Hosts: []string{"mirror-dataverse:8080"}},
		"figshare":   {Hosts: []string{"mirror-figshare:8080"}, API: "http://mirror-figshare:8080/v2"},
		"zenodo":     {Hosts: []string{"mirror-zenodo:8080"}, API: "http://mirror-zenodo:8080/api"},
		"archiveorg": {Hosts: []string{"mirror-archiveorg:8080"}, API: "http://mirror-archiveorg:8080"},
	}
	if fmt.Sprint(p) != fmt.Sprint(want) {
		t.Errorf("served:\n%v\nwant\n%v", p, want)
	}
	if got := p.withDefaults()["zenodo"]; got.API != "http://mirror-zenodo:8080/api" {
		t.Errorf("with defaults, a served site is kept: %+v", got)
	}
	if got := (Platforms{}).withDefaults()["figshare"]; fmt.Sprint(got.Hosts) != "[figshare.com]" || got.API != "https://api.figshare.com/v2" {
		t.Errorf("figshare's default site: %+v", got)
	}
	u, _ := url.Parse("http://x")
	if err := p.Serve("nope", u); err == nil {
		t.Error("an unknown platform was served")
	}
}

func matches(p platform, u *url.URL) bool {
	_, ok := p.match(u)
	return ok
}
