package fileset

import (
	"archive/zip"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestListBundle reads bundles within their bounds: a good one lists its files with digests and
// types; one of too many entries, one decompressing past the size bound (a bomb), one naming an
// unsafe path and one that is not a zip are refused with their status.
func TestListBundle(t *testing.T) {
	t.Parallel()
	write := func(files map[string][]byte, order ...string) string {
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		for _, name := range order {
			w, _ := zw.Create(name)
			w.Write(files[name])
		}
		zw.Close()
		p := filepath.Join(t.TempDir(), "b.zip")
		if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write(map[string][]byte{"a.csv": []byte("x,y\n1,2\n"), "dir/": nil, "dir/b.txt": []byte("hello")}, "a.csv", "dir/", "dir/b.txt")
	got, err := listBundle(good, 10, 1<<20)
	if err != nil || len(got) != 2 || got[0].Path != "a.csv" || *got[0].Size != 8 || got[0].MD5 != md5hex([]byte("x,y\n1,2\n")) ||
		got[1].Path != "dir/b.txt" || got[1].SHA1 != sha1hex([]byte("hello")) || got[1].Mimetype != "text/plain" {
		t.Fatalf("good bundle: %+v, %v", got, err)
	}
	many := map[string][]byte{}
	var names []string
	for i := range 11 {
		n := fmt.Sprintf("f%d", i)
		many[n], names = []byte("1"), append(names, n)
	}
	bomb := write(map[string][]byte{"zeros": make([]byte, 4<<20)}, "zeros")
	for name, c := range map[string]struct {
		path string
		want string
	}{
		"too many entries": {write(many, names...), StatusBodyTooLarge},
		"bomb":             {bomb, StatusBodyTooLarge},
		"unsafe path":      {write(map[string][]byte{"../x": []byte("1")}, "../x"), StatusPlatformError},
		"not a zip": {func() string {
			p := filepath.Join(t.TempDir(), "n.zip")
			os.WriteFile(p, []byte("<html>"), 0o644)
			return p
		}(), StatusPlatformError},
	} {
		_, err := listBundle(c.path, 10, 1<<20)
		if st, _, _ := asStatus(err); st != c.want {
			t.Errorf("%s: %v, want %s", name, err, c.want)
		}
	}
	if fi, _ := os.Stat(bomb); fi.Size() > 64<<10 {
		t.Errorf("the bomb is %d bytes compressed", fi.Size())
	}
}
