package textclean

import (
	"strings"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/htmlindex"
	"golang.org/x/text/encoding/unicode"
)

// lookup maps a charset label to an encoding using the WHATWG label table (the one browsers use),
// so that "latin1" and "iso-8859-1" mean windows-1252 as they do on the web.
func lookup(label string) (encoding.Encoding, string) {
	label = strings.ToLower(strings.TrimSpace(strings.Trim(label, `"'`)))
	if label == "" {
		return nil, ""
	}
	enc, err := htmlindex.Get(label)
	if err != nil {
		return nil, ""
	}
	name, err := htmlindex.Name(enc)
	if err != nil {
		name = label
	}
	name = strings.ToLower(name)
	if name == "utf-8" {
		return unicode.UTF8, name
	}
	return enc, name
}
