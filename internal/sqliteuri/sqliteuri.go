// Package sqliteuri builds the "file:" URIs SQLite databases are opened with.
//
// A data dir is a path the user chose, and SQLite reads the name it is given as a URI
// (https://www.sqlite.org/uri.html): "#" ends the path, "?" starts the parameters and "%XX" is
// decoded, so "/tmp/a#b/sluice.db" pasted after "file:" opened the database "/tmp/a". [File]
// escapes the path.
package sqliteuri

import (
	"net/url"
	"path/filepath"
	"strings"
)

// File returns the "file:" URI of the database at path, with the parameters q (none when q is
// empty). Every byte of path that a URI would read otherwise ('%', '?', '#') is percent-encoded;
// an absolute path gets an empty authority ("file:///…"), so a path that starts with "//" is
// not read as a host name.
func File(path string, q url.Values) string {
	p := filepath.ToSlash(path)
	var b strings.Builder
	b.WriteString("file:")
	if strings.HasPrefix(p, "/") {
		b.WriteString("//")
	}
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(p); i++ {
		switch c := p[i]; c {
		case '%', '?', '#':
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		default:
			b.WriteByte(c)
		}
	}
	if len(q) > 0 {
		b.WriteByte('?')
		b.WriteString(q.Encode())
	}
	return b.String()
}
