package detect

import (
	"mime"
	"strings"

	"github.com/gabriel-vasile/mimetype"
)

// The routes detect emits, as "detected.<route>".
const (
	RouteFinal   = "final"
	RouteArchive = "archive"
	RouteEmail   = "email"
	RoutePDF     = "pdf"
	RouteOffice  = "office"
	RouteHTML    = "html"
	RouteImage   = "image"
	RouteText    = "text"
)

// Routes lists every route in the order of the spec's table.
var routes = []string{RouteFinal, RouteArchive, RouteEmail, RoutePDF, RouteOffice, RouteHTML, RouteImage, RouteText}

// aliases maps content types to the canonical name Sluice routes on. mimetype's own alias table
// is consulted after this one (see [Canonical]).
var aliases = map[string]string{
	"application/x-zip-compressed":    "application/zip",
	"application/x-zip":               "application/zip",
	"application/zip-compressed":      "application/zip",
	"application/x-pdf":               "application/pdf",
	"application/acrobat":             "application/pdf",
	"application/vnd.pdf":             "application/pdf",
	"text/pdf":                        "application/pdf",
	"application/x-gzip":              "application/gzip",
	"application/x-gunzip":            "application/gzip",
	"application/gzipped":             "application/gzip",
	"application/gzip-compressed":     "application/gzip",
	"application/x-gzip-compressed":   "application/gzip",
	"application/bzip2":               "application/x-bzip2",
	"application/x-bzip":              "application/x-bzip2",
	"application/x-bz2":               "application/x-bzip2",
	"application/x-zstd":              "application/zstd",
	"application/tar":                 "application/x-tar",
	"application/x-gtar":              "application/x-tar",
	"application/x-rar":               "application/vnd.rar",
	"application/x-rar-compressed":    "application/vnd.rar",
	"application/x-7z":                "application/x-7z-compressed",
	"application/jar":                 "application/java-archive",
	"application/x-java-archive":      "application/java-archive",
	"application/x-iso-image":         "application/x-iso9660-image",
	"application/x-cab":               "application/vnd.ms-cab-compressed",
	"application/eml":                 "message/rfc822",
	"application/x-mbox":              "application/mbox",
	"application/x-msg":               "application/vnd.ms-outlook",
	"application/rtf":                 "application/rtf",
	"text/rtf":                        "application/rtf",
	"text/richtext":                   "application/rtf",
	"application/x-rtf":               "application/rtf",
	"application/vnd.ms-word":         "application/msword",
	"application/x-msword":            "application/msword",
	"application/doc":                 "application/msword",
	"application/msexcel":             "application/vnd.ms-excel",
	"application/x-msexcel":           "application/vnd.ms-excel",
	"application/x-ms-excel":          "application/vnd.ms-excel",
	"application/excel":               "application/vnd.ms-excel",
	"application/x-excel":             "application/vnd.ms-excel",
	"application/mspowerpoint":        "application/vnd.ms-powerpoint",
	"application/x-mspowerpoint":      "application/vnd.ms-powerpoint",
	"application/powerpoint":          "application/vnd.ms-powerpoint",
	"image/jpg":                       "image/jpeg",
	"image/pjpeg":                     "image/jpeg",
	"image/x-png":                     "image/png",
	"image/x-ms-bmp":                  "image/bmp",
	"image/x-bmp":                     "image/bmp",
	"image/tif":                       "image/tiff",
	"image/x-tiff":                    "image/tiff",
	"text/xml":                        "application/xml",
	"application/x-javascript":        "text/javascript",
	"application/javascript":          "text/javascript",
	"application/x-msdownload":        "application/vnd.microsoft.portable-executable",
	"application/x-dosexec":           "application/vnd.microsoft.portable-executable",
	"application/x-ms-dos-executable": "application/vnd.microsoft.portable-executable",
	"text/x-markdown":                 "text/markdown",
	"application/x-yaml":              "application/yaml",
	"text/yaml":                       "application/yaml",
	"text/x-yaml":                     "application/yaml",
	"application/x-shellscript":       "text/x-shellscript",
	"application/x-sh":                "text/x-shellscript",
	"text/x-sh":                       "text/x-shellscript",
}

// Canonical returns the canonical form of a content type: lowercased, without parameters, with
// known aliases replaced (application/x-zip-compressed → application/zip, application/x-pdf →
// application/pdf, …). It returns "" for an empty or unparsable type.
func Canonical(contentType string) string {
	t := strings.ToLower(strings.TrimSpace(contentType))
	if t == "" {
		return ""
	}
	if mt, _, err := mime.ParseMediaType(t); err == nil {
		t = mt
	} else if i := strings.IndexByte(t, ';'); i >= 0 {
		t = strings.TrimSpace(t[:i])
	}
	if a, ok := aliases[t]; ok {
		return a
	}
	if m := mimetype.Lookup(t); m != nil {
		c, _, _ := mime.ParseMediaType(m.String())
		if a, ok := aliases[c]; ok {
			return a
		}
		if c != "" {
			return c
		}
	}
	return t
}

// exact maps canonical content types to routes. Looked up before the major-type wildcards.
var exact = map[string]string{}

func init() {
	add := func(route string, types ...string) {
		for _, t := range types {
			exact[t] = route
		}
	}
	add(RoutePDF, "application/pdf")
	add(RouteArchive,
		"application/zip", "application/x-tar", "application/gzip", "application/x-bzip2",
		"application/x-xz", "application/zstd", "application/x-7z-compressed", "application/vnd.rar",
		"application/x-iso9660-image", "application/vnd.ms-cab-compressed", "application/java-archive",
		"application/x-compressed-tar", "application/x-bzip-compressed-tar", "application/x-bzip2-compressed-tar",
		"application/x-xz-compressed-tar", "application/x-zstd-compressed-tar", "application/lzip",
		"application/x-lzip", "application/x-lz4", "application/x-brotli", "application/zlib")
	add(RouteEmail, "message/rfc822", "application/mbox", "application/vnd.ms-outlook")
	add(RouteHTML, "text/html", "application/xhtml+xml")
	add(RouteText,
		"application/json", "application/xml", "text/javascript", "application/yaml", "application/x-ndjson",
		"application/geo+json", "application/toml", "application/sql", "application/x-subrip",
		"application/x-python", "application/x-ruby", "application/x-perl", "application/x-php",
		"application/x-tcl", "application/x-tex", "application/x-latex", "application/ecmascript",
		"application/typescript", "application/x-httpd-php", "application/x-empty")
	add(RouteOffice,
		"application/msword", "application/vnd.ms-excel", "application/vnd.ms-powerpoint", "application/rtf",
		"application/vnd.ms-excel.sheet.binary.macroenabled.12", "application/vnd.ms-excel.sheet.macroenabled.12",
		"application/vnd.ms-excel.template.macroenabled.12", "application/vnd.ms-powerpoint.presentation.macroenabled.12",
		"application/vnd.ms-powerpoint.slideshow.macroenabled.12", "application/vnd.ms-powerpoint.template.macroenabled.12",
		"application/vnd.ms-publisher", "application/vnd.ms-word.document.macroenabled.12",
		"application/vnd.ms-word.template.macroenabled.12", "application/vnd.ms-works", "application/vnd.visio",
		"application/vnd.ms-visio.drawing.main+xml", "application/vnd.wordperfect", "application/wordperfect",
		"application/vnd.lotus-1-2-3", "application/vnd.lotus-wordpro", "application/x-123", "application/vnd.corel-draw",
		"application/clarisworks", "application/macwriteii", "application/prs.plucker", "application/vnd.palm",
		"application/vnd.stardivision.writer-global", "application/x-aportisdoc", "application/x-dbase",
		"application/x-dbf", "application/x-fictionbook+xml", "application/x-hwp", "application/x-iwork-keynote-sffkey",
		"application/x-quattropro", "application/x-t602", "application/x-wpg", "image/x-freehand",
		"application/vnd.sun.xml.calc", "application/vnd.sun.xml.calc.template", "application/vnd.sun.xml.draw",
		"application/vnd.sun.xml.draw.template", "application/vnd.sun.xml.impress",
		"application/vnd.sun.xml.impress.template", "application/vnd.sun.xml.writer",
		"application/vnd.sun.xml.writer.global", "application/vnd.sun.xml.writer.template")
	for _, s := range []string{"chart", "chart-template", "graphics", "graphics-flat-xml", "graphics-template",
		"presentation", "presentation-flat-xml", "presentation-template", "spreadsheet", "spreadsheet-flat-xml",
		"spreadsheet-template", "text", "text-flat-xml", "text-master", "text-template", "text-web", "formula"} {
		add(RouteOffice, "application/vnd.oasis.opendocument."+s)
	}
	for _, s := range []string{"presentationml.presentation", "presentationml.slide", "presentationml.slideshow",
		"presentationml.template", "spreadsheetml.sheet", "spreadsheetml.template", "wordprocessingml.document",
		"wordprocessingml.template"} {
		add(RouteOffice, "application/vnd.openxmlformats-officedocument."+s)
	}
}

// Route returns the route for a canonical content type: the exact type first, then structured
// suffixes (+json and +xml are text), then the major type (text/*, image/*). ok is false when
// the type is unhandled.
func Route(canonical string) (route string, ok bool) {
	if r, ok := exact[canonical]; ok {
		return r, true
	}
	if strings.HasSuffix(canonical, "+json") || strings.HasSuffix(canonical, "+xml") {
		return RouteText, true
	}
	major, _, _ := strings.Cut(canonical, "/")
	switch major {
	case "text":
		return RouteText, true
	case "image":
		return RouteImage, true
	}
	return "", false
}
