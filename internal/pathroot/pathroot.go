// Package pathroot decides which locations named in a request the server may read. It holds the
// one classification of a location — a local path (or file:// URL), an http(s):// URL or an
// s3:// URL — and the one check that a local location lies inside a configured path root
// (--path-root), with [os.Root]'s rules for symbolic links: a link may lead elsewhere inside the
// root, never out of it, and an absolute link is refused. Every route that takes a location uses
// [Roots.Check]; every reader of a local location opens it through an [os.Root], so a link
// swapped in after the check cannot lead out either.
package pathroot

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Kind is the kind of a location.
type Kind int

// The kinds of location.
const (
	// Local is a path on the server: a path, or a file:///path URL.
	Local Kind = iota + 1
	// HTTP is an http:// or https:// URL with a host.
	HTTP
	// S3 is an s3://bucket/prefix URL.
	S3
)

// Location is a classified location.
type Location struct {
	Kind Kind
	// Path is a Local location's path: the location as given, or a file:// URL's decoded path.
	Path string
	// URL is an HTTP or S3 location, parsed.
	URL *url.URL
}

// Error is a refused location: Location as the request gave it, and the Reason in plain words.
// Its text is meant for the user who named the location.
type Error struct {
	Location string
	Reason   string
}

func (e *Error) Error() string { return fmt.Sprintf("%q: %s", e.Location, e.Reason) }

func refuse(loc, format string, args ...any) *Error {
	return &Error{Location: loc, Reason: fmt.Sprintf(format, args...)}
}

// Classify says what kind of location loc is. It is the only place that decides whether a
// location is local: the API's checks and the readers (the graph fetcher, the objects actions)
// all call it, so they cannot disagree. A string with a scheme ("name:" before any "/") is a
// URL: file, http, https or s3, every other scheme is refused — "a:/../x" is not read as a
// relative path. A string without one is a local path, taken literally (no percent-decoding).
// A control character (NUL among them) anywhere, raw or in a URL's decoded path, is refused.
// Its errors are [*Error]s.
func Classify(loc string) (Location, error) {
	if loc == "" {
		return Location{}, refuse(loc, "no location given")
	}
	if strings.ContainsFunc(loc, isControl) {
		return Location{}, refuse(loc, "it contains a control character")
	}
	scheme, ok := schemeOf(loc)
	if !ok {
		return Location{Kind: Local, Path: loc}, nil
	}
	u, err := url.Parse(loc)
	if err != nil {
		return Location{}, refuse(loc, "it is not a valid %s: URL", scheme)
	}
	switch scheme {
	case "http", "https":
		if u.Host == "" {
			return Location{}, refuse(loc, "an %s: URL needs a host", scheme)
		}
		return Location{Kind: HTTP, URL: u}, nil
	case "s3":
		if u.Host == "" {
			return Location{}, refuse(loc, "an s3: URL needs a bucket (s3://bucket/prefix)")
		}
		return Location{Kind: S3, URL: u}, nil
	case "file":
		if u.Opaque != "" || (u.Host != "" && u.Host != "localhost") || !strings.HasPrefix(u.Path, "/") {
			return Location{}, refuse(loc, "a file: URL must name an absolute path on this server (file:///path)")
		}
		if strings.ContainsFunc(u.Path, isControl) {
			return Location{}, refuse(loc, "it contains a control character")
		}
		return Location{Kind: Local, Path: u.Path}, nil
	}
	return Location{}, refuse(loc, "the scheme %q is not one this server reads (use a path, file:///path, http(s):// or s3://)", scheme)
}

// schemeOf returns loc's URL scheme, lowercased: the letters, digits, "+", "-" and "." before
// the first ":", starting with a letter (RFC 3986), when that ":" comes before any "/".
func schemeOf(loc string) (string, bool) {
	i := strings.IndexByte(loc, ':')
	if i <= 0 {
		return "", false
	}
	for j, c := range loc[:i] {
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (j == 0 || !(c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return "", false
		}
	}
	return strings.ToLower(loc[:i]), true
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// Roots are the configured path roots: directories, and s3://bucket/prefix locations. The zero
// value has none, and refuses every local and s3:// location. It is safe for concurrent use.
type Roots struct {
	dirs []string // absolute and clean
	s3   []string // without a trailing slash
}

// New returns the roots of a --path-root list: s3:// locations, and directories (made absolute).
func New(roots []string) Roots {
	var rs Roots
	for _, r := range roots {
		if strings.HasPrefix(r, "s3://") {
			rs.s3 = append(rs.s3, strings.TrimSuffix(r, "/"))
		} else if abs, err := filepath.Abs(r); err == nil {
			rs.dirs = append(rs.dirs, abs)
		}
	}
	return rs
}

// Target is a location that passed [Roots.Check].
type Target struct {
	Location
	// Given is the location as the request gave it.
	Given string
	// Root is a Local target's path root (absolute), and Rel its path inside the root: "." for
	// the root itself, with a trailing slash when the location had one.
	Root, Rel string
	// Abs is a Local target's absolute path: Root joined with Rel.
	Abs string
	// Info describes a Local target, read inside its root (links followed).
	Info fs.FileInfo
}

// Check classifies loc ([Classify]) and checks it: a Local location must lie under a directory
// root, with no ".." element, and exist inside it by [os.Root]'s rules (a link leading out of the
// root, or an absolute link, is refused); an S3 location must lie under an s3:// root; an HTTP
// location is not checked. Which kinds a route accepts is the route's to decide. A location
// refused is an [*Error]; any other error (a root that cannot be opened) is the server's.
func (rs Roots) Check(loc string) (Target, error) {
	l, err := Classify(loc)
	if err != nil {
		return Target{}, err
	}
	switch l.Kind {
	case S3:
		return rs.checkS3(loc, l)
	case Local:
		return rs.checkLocal(loc, l)
	}
	return Target{Location: l, Given: loc}, nil
}

func (rs Roots) checkS3(loc string, l Location) (Target, error) {
	if hasDotDot(l.URL.Path) {
		return Target{}, refuse(loc, `".." is not allowed in a location`)
	}
	trimmed := strings.TrimSuffix(loc, "/")
	for _, r := range rs.s3 {
		if trimmed == r || strings.HasPrefix(trimmed, r+"/") {
			return Target{Location: l, Given: loc}, nil
		}
	}
	if len(rs.s3) == 0 {
		return Target{}, refuse(loc, "this server has no s3:// path root (--path-root s3://bucket/prefix)")
	}
	return Target{}, refuse(loc, "it is not under a configured s3:// path root (--path-root s3://bucket/prefix)")
}

func (rs Roots) checkLocal(loc string, l Location) (Target, error) {
	if hasDotDot(l.Path) {
		return Target{}, refuse(loc, `".." is not allowed in a server-side path`)
	}
	if len(rs.dirs) == 0 {
		return Target{}, refuse(loc, "this server reads no server-side paths (it has no --path-root)")
	}
	abs, err := filepath.Abs(l.Path)
	if err != nil {
		return Target{}, refuse(loc, "it is not a usable path")
	}
	t := Target{Location: l, Given: loc}
	for _, r := range rs.dirs {
		if rel, err := filepath.Rel(r, abs); err == nil && (rel == "." || filepath.IsLocal(rel)) {
			t.Root, t.Rel, t.Abs = r, rel, abs
			break
		}
	}
	if t.Root == "" {
		return Target{}, refuse(loc, "it is not under a configured path root (--path-root)")
	}
	// A trailing slash says "a directory": kept, so that "file.txt/" is not read as file.txt.
	if strings.HasSuffix(l.Path, "/") && t.Rel != "." {
		t.Rel += "/"
	}
	root, err := os.OpenRoot(t.Root)
	if err != nil {
		return Target{}, fmt.Errorf("open path root %s: %w", t.Root, err)
	}
	defer root.Close()
	if t.Info, err = root.Stat(t.Rel); err != nil {
		return Target{}, refuse(loc, "%s", Reason(err))
	}
	return t, nil
}

// hasDotDot reports whether a slash-separated path has a ".." element. Such a path is refused
// even when it would stay inside its root: what it names depends on links along the way.
func hasDotDot(p string) bool {
	for el := range strings.SplitSeq(filepath.ToSlash(p), "/") {
		if el == ".." {
			return true
		}
	}
	return false
}

// Open opens a Local target for reading, inside its root: a link swapped in since the check
// still cannot lead out. The file is opened without blocking, so a FIFO put in its place does not
// wait for a writer; the caller checks what it opened (f.Stat) before reading. Its errors are
// [*Error]s naming the target.
func (t Target) Open() (*os.File, error) {
	f, err := OpenIn(t.Root, t.Rel)
	if err != nil {
		return nil, refuse(t.Given, "%s", Reason(err))
	}
	return f, nil
}

// OpenIn opens the file at name (a relative path) inside the directory dir for reading, by
// [os.Root]'s rules: name may not leave dir, through ".." or through a link. Readers of a
// location checked earlier (a sheet's files inside its files_dir, a graph's metadata inside its
// source) open files so. The file is opened without blocking (see [Target.Open]).
func OpenIn(dir, name string) (*os.File, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return OpenFile(root, name)
}

// OpenDir opens the local directory at loc as an [os.Root] for a reader that runs after the
// check (an action, at task time): through its path root — [os.OpenRoot] of the root, then
// [os.Root.OpenRoot] of loc inside it — so every element of loc's path, ancestors included, is
// resolved by os.Root's rules when the directory is opened. A folder swapped for a link leading
// out since loc was checked is refused, as at the check. A nil rs has no path roots to hold
// to: it opens any directory with [os.OpenRoot] (a process whose locations come from the user at
// its own shell, never a server's). A location refused is an [*Error] naming loc; any other
// error (a path root that cannot be opened) is the server's. The caller closes the root.
func (rs *Roots) OpenDir(loc string) (*os.Root, error) {
	l, err := Classify(loc)
	if err != nil {
		return nil, err
	}
	if l.Kind != Local {
		return nil, refuse(loc, "it is not a directory on this server")
	}
	if hasDotDot(l.Path) {
		return nil, refuse(loc, `".." is not allowed in a server-side path`)
	}
	abs, err := filepath.Abs(l.Path)
	if err != nil {
		return nil, refuse(loc, "it is not a usable path")
	}
	if rs == nil {
		dir, err := os.OpenRoot(abs)
		if err != nil {
			return nil, refuse(loc, "%s", Reason(err))
		}
		return dir, nil
	}
	if len(rs.dirs) == 0 {
		return nil, refuse(loc, "this server reads no server-side paths (it has no --path-root)")
	}
	for _, r := range rs.dirs {
		rel, err := filepath.Rel(r, abs)
		if err != nil || (rel != "." && !filepath.IsLocal(rel)) {
			continue
		}
		root, err := os.OpenRoot(r)
		if err != nil {
			return nil, fmt.Errorf("open path root %s: %w", r, err)
		}
		if rel == "." {
			return root, nil
		}
		defer root.Close()
		dir, err := root.OpenRoot(rel)
		if err != nil {
			return nil, refuse(loc, "%s", Reason(err))
		}
		return dir, nil
	}
	return nil, refuse(loc, "it is not under a configured path root (--path-root)")
}

// OpenFile opens the file at name (a relative path) in dir for reading, by [os.Root]'s rules
// and without blocking, as [OpenIn] does.
func OpenFile(dir *os.Root, name string) (*os.File, error) {
	return dir.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}

// errEscapes and errNotDir are the texts of os.Root's errors for a path leaving the root and for
// a root opened on a file. os exports no sentinel for them.
const (
	errEscapes = "path escapes from parent"
	errNotDir  = "not a directory"
)

// Reason says in plain words why a file could not be reached inside a root ([os.Root]'s errors,
// as from [OpenIn]), for a message to the user: never Go's own text.
func Reason(err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "no such file or directory"
	case Escapes(err):
		return "it leads out of its root (through a symbolic link that points outside, or is absolute)"
	case errors.Is(err, fs.ErrPermission):
		return "the server is not permitted to read it"
	case errors.Is(err, syscall.ENOTDIR):
		return "a file is named as a directory (a trailing slash, or a file in the middle of the path)"
	case isPathErr(err, errNotDir):
		return "it is not a directory"
	case errors.Is(err, syscall.ELOOP):
		return "too many levels of symbolic links"
	case errors.Is(err, syscall.ENAMETOOLONG):
		return "the name is too long"
	}
	return "it cannot be read"
}

// Escapes reports whether err is [os.Root]'s refusal of a path leading out of its root.
func Escapes(err error) bool { return isPathErr(err, errEscapes) }

// isPathErr reports whether err is an [fs.PathError] whose own error has the text msg.
func isPathErr(err error, msg string) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && pe.Err.Error() == msg
}
