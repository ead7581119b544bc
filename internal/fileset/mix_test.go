package fileset

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/enginetest"
)

// mixFileSize is about the size of the mix's files (the benchmark makes them larger).
var mixFileSize = 1500

// mixRequest is request i of a realistic mix (after Sandcrawler's first pilot: mostly misses,
// then 404s, restricted, scope, successes, limits and mismatches), registered on the fakes,
// with the status it must end with and the file keys a success downloads.
func mixRequest(f *fakes, i int) (Request, string, []string) {
	r := Request{IngestType: "dataset", LinkSource: "mix", LinkSourceID: fmt.Sprint(i), IngestRequestSource: "test", ReleaseStage: "published"}
	id := 1_000_000 + i
	rec := func(access string, files ...map[string]any) string { return f.zenodoRecord(id, access, files...) }
	var want string
	var keys []string
	honest := func(n int) map[string]any {
		key := fmt.Sprintf("mix%d/file%d.csv", i, len(keys))
		keys = append(keys, key)
		return f.file(key, content(key, mixFileSize+37*len(keys)+i%100), "")
	}
	switch m := i % 100; {
	case m < 55:
		r.BaseURL, want = fmt.Sprintf("http://localhost:1/record/%d", id), StatusNoCapture
	case m < 60:
		f.set2(f.landing, fmt.Sprintf("/record/%d", id), 404)
		r.BaseURL, want = baseOf(f.zenodo)+fmt.Sprintf("/record/%d", id), StatusTerminalBadStatus
	case m < 68:
		r.BaseURL, want = baseOf(f.zenodo)+fmt.Sprintf("/record/%d", id), StatusPlatform404
	case m < 70:
		r.BaseURL, want = baseOf(f.web)+fmt.Sprintf("/landing/%d", id), StatusNoPlatformMatch
	case m < 73:
		r.BaseURL, want = rec("restricted", honest(1)), StatusPlatformRestricted
		keys = nil
	case m < 76:
		f.set(f.zenodoRs, fmt.Sprint(id), map[string]any{"id": id, "conceptrecid": id, "metadata": map[string]any{"access_right": "open"}})
		r.BaseURL, want = baseOf(f.zenodo)+fmt.Sprintf("/record/%d", id), StatusPlatformScope
	case m < 84:
		files := []map[string]any{honest(0), honest(1)}
		if i%2 == 0 {
			files = append(files, honest(2))
		}
		r.BaseURL, want = rec("open", files...), StatusSuccess
	case m < 94:
		r.BaseURL, want = rec("open", honest(0)), StatusSuccessFile
	case m < 96:
		var many []map[string]any
		for j := range 201 {
			many = append(many, map[string]any{"key": fmt.Sprint(j), "size": 1, "links": map[string]any{"self": baseOf(f.web) + "/f/none"}})
		}
		r.BaseURL, want = rec("open", many...), StatusTooManyFiles
	case m < 98:
		r.BaseURL, want = rec("open"), StatusEmptyManifest
	case m < 99:
		bad := honest(0)
		bad["checksum"] = "md5:" + md5hex([]byte("not it"))
		r.BaseURL, want = rec("open", bad), StatusMismatchMD5
		keys = nil
	default:
		bad := honest(0)
		bad["size"] = 99999
		r.BaseURL, want = rec("open", bad), StatusMismatchSize
		keys = nil
	}
	return r, want, keys
}

// TestMixTwice runs a JSON-lines-sized batch of requests with a realistic status mix: each
// ends with its expected status; a second run of the same requests makes every success
// success-existing, downloading none of their files again.
func TestMixTwice(t *testing.T) {
	t.Parallel()
	n := 1000
	if testing.Short() {
		n = 200
	}
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		f := newFakes(t)
		cfg := f.config(t)
		k, _ := startKit(t, open, cfg)
		reqs := make([]Request, n)
		wants := make([]string, n)
		var successKeys []string
		for i := range n {
			var keys []string
			reqs[i], wants[i], keys = mixRequest(f, i)
			successKeys = append(successKeys, keys...)
		}
		_, first := runRequests(t, k, reqs, 3*time.Minute)
		tally := map[string]int{}
		for i, r := range first {
			tally[r.Status]++
			if r.Status != wants[i] {
				t.Errorf("request %d (%s): %q (%s), want %q", i, reqs[i].BaseURL, r.Status, r.ErrorMessage, wants[i])
			}
		}
		t.Logf("first run: %v", tally)
		for _, key := range successKeys {
			if c := f.getCount(key); c != 1 {
				t.Errorf("%s downloaded %d times in the first run, want once", key, c)
			}
		}
		_, second := runRequests(t, k, reqs, 3*time.Minute)
		for i, r := range second {
			want := wants[i]
			if first[i].Hit {
				want = StatusSuccessExisting
				if r.PlatformID != first[i].PlatformID || len(r.Manifest) != len(first[i].Manifest) || r.Manifest[0].SHA256 != first[i].Manifest[0].SHA256 {
					t.Errorf("request %d: existing result %+v differs from the first %+v", i, r, first[i])
				}
			}
			if r.Status != want {
				t.Errorf("second run, request %d (%s): %q, want %q", i, reqs[i].BaseURL, r.Status, want)
			}
		}
		for _, key := range successKeys {
			if c := f.getCount(key); c != 1 {
				t.Errorf("%s downloaded %d times after the second run, want once in all", key, c)
			}
		}
		checkNoPartials(t, cfg.PartialDir)
	})
}
