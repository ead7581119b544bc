package pathroot_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/pathroot"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, loc string
		kind      pathroot.Kind
		path      string // a Local location's path
		refused   string // part of the reason, when refused
	}{
		{"absolute path", "/srv/in", pathroot.Local, "/srv/in", ""},
		{"relative path", "in/sub", pathroot.Local, "in/sub", ""},
		{"dotted relative path with a colon", "./a:b", pathroot.Local, "./a:b", ""},
		{"percent stays literal in a path", "/srv/%2e%2e/x", pathroot.Local, "/srv/%2e%2e/x", ""},
		{"file URL", "file:///srv/in", pathroot.Local, "/srv/in", ""},
		{"file URL on localhost", "file://localhost/srv/in", pathroot.Local, "/srv/in", ""},
		{"file URL with encoded dots", "file:///srv/%2e%2e/etc", pathroot.Local, "/srv/../etc", ""},
		{"http", "http://proxy.example/go", pathroot.HTTP, "", ""},
		{"https upper-case scheme", "HTTPS://proxy.example/go", pathroot.HTTP, "", ""},
		{"s3", "s3://bucket/prefix", pathroot.S3, "", ""},
		{"one-letter scheme (the report)", "a:/../../etc", 0, "", `the scheme "a" is not one this server reads`},
		{"unknown scheme", "ftp://host/x", 0, "", `the scheme "ftp"`},
		{"javascript", "javascript:alert(1)", 0, "", `the scheme "javascript"`},
		{"file URL on another host", "file://other/etc/passwd", 0, "", "file:///path"},
		{"opaque file URL", "file:etc/passwd", 0, "", "file:///path"},
		{"http without a host", "http:/x", 0, "", "needs a host"},
		{"s3 without a bucket", "s3:///x", 0, "", "needs a bucket"},
		{"NUL", "/srv/in\x00/x", 0, "", "control character"},
		{"tab", "/srv/\tin", 0, "", "control character"},
		{"encoded NUL in a file URL", "file:///srv/in%00x", 0, "", "control character"},
		{"empty", "", 0, "", "no location"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l, err := pathroot.Classify(tt.loc)
			if tt.refused != "" {
				var pe *pathroot.Error
				if !errors.As(err, &pe) || !strings.Contains(pe.Reason, tt.refused) || pe.Location != tt.loc {
					t.Fatalf("Classify(%q) = %+v, %v; want refused with %q", tt.loc, l, err, tt.refused)
				}
				return
			}
			if err != nil || l.Kind != tt.kind || l.Path != tt.path {
				t.Fatalf("Classify(%q) = %+v, %v; want kind %d, path %q", tt.loc, l, err, tt.kind, tt.path)
			}
		})
	}
}

// setupRoot makes a path root and, beside it, a directory outside it:
//
//	root/good.txt, root/sub/, root/sub/inside.txt -> ../good.txt, root/out.txt -> ../outside/secret.txt,
//	root/outdir -> ../outside, root/abs.txt -> <root>/good.txt (absolute), outside/secret.txt
func setupRoot(t *testing.T) (root, outside string) {
	t.Helper()
	dir := t.TempDir()
	root, outside = filepath.Join(dir, "root"), filepath.Join(dir, "outside")
	for _, err := range []error{
		os.MkdirAll(filepath.Join(root, "sub"), 0o700),
		os.MkdirAll(outside, 0o700),
		os.WriteFile(filepath.Join(root, "good.txt"), []byte("good"), 0o600),
		os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret"), 0o600),
		os.Symlink("../good.txt", filepath.Join(root, "sub", "inside.txt")),
		os.Symlink("../outside/secret.txt", filepath.Join(root, "out.txt")),
		os.Symlink("../outside", filepath.Join(root, "outdir")),
		os.Symlink(filepath.Join(root, "good.txt"), filepath.Join(root, "abs.txt")),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return root, outside
}

func TestCheck(t *testing.T) {
	t.Parallel()
	root, outside := setupRoot(t)
	rs := pathroot.New([]string{root, "s3://ingest/batch/"})
	for _, tt := range []struct {
		name, loc string
		refused   string
	}{
		{"file", root + "/good.txt", ""},
		{"the root", root, ""},
		{"the root with a slash", root + "/", ""},
		{"directory", root + "/sub/", ""},
		{"link inside the root", root + "/sub/inside.txt", ""},
		{"file URL", "file://" + root + "/good.txt", ""},
		{"http is not checked", "https://proxy.example/", ""},
		{"s3 under its root", "s3://ingest/batch/one", ""},
		{"dot-dot", root + "/../outside/secret.txt", `".." is not allowed`},
		{"dot-dot staying inside", root + "/sub/../good.txt", `".." is not allowed`},
		{"encoded dots in a file URL", "file://" + root + "/%2e%2e/outside/secret.txt", `".." is not allowed`},
		{"absolute path outside", outside + "/secret.txt", "not under a configured path root"},
		{"sibling with the root's name as a prefix", root + "x/good.txt", "not under a configured path root"},
		{"link to a file outside", root + "/out.txt", "leads out of its root"},
		{"link to a directory outside", root + "/outdir", "leads out of its root"},
		{"file through a link to a directory outside", root + "/outdir/secret.txt", "leads out of its root"},
		{"link to a directory outside, trailing slash", root + "/outdir/", "leads out of its root"},
		{"absolute link", root + "/abs.txt", "leads out of its root"},
		{"file with a trailing slash", root + "/good.txt/", "named as a directory"},
		{"missing", root + "/nope.txt", "no such file"},
		{"NUL", root + "/good.txt\x00", "control character"},
		{"one-letter scheme", "a:/../../" + outside, "scheme"},
		{"s3 outside its root", "s3://ingest/other", "not under a configured s3:// path root"},
		{"s3 dot-dot", "s3://ingest/batch/../other", `".." is not allowed`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tg, err := rs.Check(tt.loc)
			if tt.refused != "" {
				var pe *pathroot.Error
				if !errors.As(err, &pe) || !strings.Contains(pe.Reason, tt.refused) || pe.Location != tt.loc {
					t.Fatalf("Check(%q) = %+v, %v; want refused with %q", tt.loc, tg, err, tt.refused)
				}
				return
			}
			if err != nil {
				t.Fatalf("Check(%q): %v", tt.loc, err)
			}
		})
	}
	if _, err := (pathroot.Roots{}).Check(root + "/good.txt"); err == nil || !strings.Contains(err.Error(), "no --path-root") {
		t.Errorf("Check with no roots: %v, want refused naming --path-root", err)
	}
}

// TestOpenAfterSwap checks that a target checked while it was a file cannot be read once a link
// leading out of the root has taken its place: Open reads inside the root.
func TestOpenAfterSwap(t *testing.T) {
	t.Parallel()
	root, _ := setupRoot(t)
	rs := pathroot.New([]string{root})
	tg, err := rs.Check(root + "/good.txt")
	if err != nil {
		t.Fatal(err)
	}
	f, err := tg.Open()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(f)
	f.Close()
	if string(b) != "good" {
		t.Fatalf("read %q", b)
	}
	if err := os.Remove(filepath.Join(root, "good.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../outside/secret.txt", filepath.Join(root, "good.txt")); err != nil {
		t.Fatal(err)
	}
	if f, err := tg.Open(); err == nil || !strings.Contains(err.Error(), "leads out of its root") {
		if f != nil {
			f.Close()
		}
		t.Fatalf("Open after the swap: %v, want refused", err)
	}
	if f, err := pathroot.OpenIn(root, "sub/../outdir/secret.txt"); err == nil || !pathroot.Escapes(err) {
		if f != nil {
			f.Close()
		}
		t.Fatalf("OpenIn through a link outside: %v, want it refused as an escape", err)
	}
}

// TestOpenDirAncestorSwap checks that a directory checked under its path root cannot be opened
// once one of its ancestor folders has been swapped for a link leading out of the root: OpenDir
// resolves the whole path inside the root when it opens it, not when it was checked.
func TestOpenDirAncestorSwap(t *testing.T) {
	t.Parallel()
	root, outside := setupRoot(t)
	for _, d := range []string{filepath.Join(root, "batch", "files"), filepath.Join(outside, "files")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "files", "a.txt"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	rs := pathroot.New([]string{root})
	loc := filepath.Join(root, "batch", "files")
	if _, err := rs.Check(loc); err != nil {
		t.Fatal(err)
	}
	dir, err := rs.OpenDir(loc)
	if err != nil {
		t.Fatal(err)
	}
	dir.Close()
	// The ancestor "batch" becomes a link to the folder outside, which has a files/ of its own.
	if err := os.RemoveAll(filepath.Join(root, "batch")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "batch")); err != nil {
		t.Fatal(err)
	}
	if dir, err := rs.OpenDir(loc); err == nil || !strings.Contains(err.Error(), "leads out of its root") {
		if dir != nil {
			dir.Close()
		}
		t.Fatalf("OpenDir after the swap: %v, want refused as leading out", err)
	}
	for _, tt := range []struct{ name, loc, refused string }{
		{"outside the roots", outside, "not under a configured path root"},
		{"dot-dot", root + "/sub/..", `".." is not allowed`},
		{"a URL", "https://example.com/x", "not a directory on this server"},
		{"a file", root + "/good.txt", "it is not a directory"},
		{"missing", root + "/nope", "no such file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir, err := rs.OpenDir(tt.loc)
			var pe *pathroot.Error
			if !errors.As(err, &pe) || !strings.Contains(pe.Reason, tt.refused) || pe.Location != tt.loc {
				if dir != nil {
					dir.Close()
				}
				t.Fatalf("OpenDir(%q) = %v; want refused with %q", tt.loc, err, tt.refused)
			}
		})
	}
	if _, err := (&pathroot.Roots{}).OpenDir(root); err == nil || !strings.Contains(err.Error(), "no --path-root") {
		t.Errorf("OpenDir with no roots: %v, want refused naming --path-root", err)
	}
	var any *pathroot.Roots // no path roots to hold to: any directory opens
	if dir, err := any.OpenDir(outside); err != nil {
		t.Errorf("OpenDir on nil roots: %v", err)
	} else {
		dir.Close()
	}
}
