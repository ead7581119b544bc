package fileset

import (
	"io"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// HTMLBiblio is the citation metadata of a landing page's <head> (Sandcrawler's html_biblio,
// its BiblioMetadata): Highwire citation_*, bepress, eprints, PRISM, Open Graph and Dublin Core
// meta tags, the first of each field's tags in order of preference.
type HTMLBiblio struct {
	Title           string   `json:"title,omitempty"`
	Subtitle        string   `json:"subtitle,omitempty"`
	ContribNames    []string `json:"contrib_names,omitempty"`
	ReleaseDate     string   `json:"release_date,omitempty"`
	ReleaseYear     int      `json:"release_year,omitempty"`
	Lang            string   `json:"lang,omitempty"`
	Volume          string   `json:"volume,omitempty"`
	Issue           string   `json:"issue,omitempty"`
	Number          string   `json:"number,omitempty"`
	FirstPage       string   `json:"first_page,omitempty"`
	LastPage        string   `json:"last_page,omitempty"`
	Publisher       string   `json:"publisher,omitempty"`
	ContainerName   string   `json:"container_name,omitempty"`
	ContainerAbbrev string   `json:"container_abbrev,omitempty"`
	ContainerISSN   string   `json:"container_issn,omitempty"`
	RawReferences   []string `json:"raw_references,omitempty"`
	DOI             string   `json:"doi,omitempty"`
	PMID            string   `json:"pmid,omitempty"`
	ISBN13          string   `json:"isbn13,omitempty"`
	Abstract        string   `json:"abstract,omitempty"`
	PDFFulltextURL  string   `json:"pdf_fulltext_url,omitempty"`
}

// biblioFields maps each field to its meta names, best first (Sandcrawler's HEAD_META_PATTERNS;
// a name matches case-insensitively, as Dublin Core is written DC.title as often as dc.title).
var biblioFields = []struct {
	set   func(b *HTMLBiblio, v string)
	names []string
}{
	{func(b *HTMLBiblio, v string) { b.Title = v }, []string{"citation_title", "eprints.title", "prism.title", "bepress_citation_title", "og:title", "dcterms.title", "dc.title"}},
	{func(b *HTMLBiblio, v string) { b.Subtitle = v }, []string{"prism.subtitle"}},
	{func(b *HTMLBiblio, v string) { b.DOI = v }, []string{"citation_doi", "doi", "prism.doi", "bepress_citation_doi", "dc.identifier.doi"}},
	{func(b *HTMLBiblio, v string) { b.PMID = v }, []string{"citation_pmid"}},
	{func(b *HTMLBiblio, v string) { b.Abstract = v }, []string{"citation_abstract", "bepress_citation_abstract", "eprints.abstract", "dcterms.abstract", "prism.teaser", "dc.description", "og:description"}},
	{func(b *HTMLBiblio, v string) { b.ContainerName = v }, []string{"citation_journal_title", "bepress_citation_journal_title", "citation_conference_title", "bepress_citation_conference_title", "prism.publicationname", "eprints.publication", "dc.relation.ispartof", "dc.source", "og:site_name"}},
	{func(b *HTMLBiblio, v string) { b.ContainerAbbrev = v }, []string{"citation_journal_abbrev"}},
	{func(b *HTMLBiblio, v string) { b.ReleaseDate = parseBiblioDate(v) }, []string{"citation_publication_date", "bepress_citation_publication_date", "prism.publicationdate", "citation_date", "bepress_citation_date", "citation_online_date", "bepress_citation_online_date", "article:published", "eprints.datestamp", "eprints.date", "dc.date.created", "dc.issued", "dcterms.date", "dc.date"}},
	{func(b *HTMLBiblio, v string) { b.ReleaseYear, _ = strconv.Atoi(v) }, []string{"citation_year", "prism:copyrightyear"}},
	{func(b *HTMLBiblio, v string) { b.FirstPage = v }, []string{"citation_firstpage", "bepress_citation_firstpage", "prism.startingpage", "dc.citation.spage"}},
	{func(b *HTMLBiblio, v string) { b.LastPage = v }, []string{"citation_lastpage", "bepress_citation_lastpage", "prism.endingpage", "dc.citation.epage"}},
	{func(b *HTMLBiblio, v string) { b.Issue = v }, []string{"citation_issue", "bepress_citation_issue", "prism.issueidentifier", "dc.citation.issue"}},
	{func(b *HTMLBiblio, v string) { b.Volume = v }, []string{"citation_volume", "bepress_citation_volume", "prism.volume", "dc.citation.volume"}},
	{func(b *HTMLBiblio, v string) { b.Number = v }, []string{"citation_technical_report_number", "bepress_citation_technical_report_number", "citation_number", "bepress_citation_number", "prism.number"}},
	{func(b *HTMLBiblio, v string) { b.ContainerISSN = v }, []string{"citation_issn", "bepress_citation_issn", "prism.issn", "prism.eissn", "eprints.issn", "dc.source.issn"}},
	{func(b *HTMLBiblio, v string) { b.ISBN13 = v }, []string{"citation_isbn", "bepress_citation_isbn", "prism.isbn"}},
	{func(b *HTMLBiblio, v string) { b.Publisher = v }, []string{"citation_publisher", "bepress_citation_publisher", "eprints.publisher", "citation_technical_report_institution", "dcterms.publisher", "dc.publisher"}},
	{func(b *HTMLBiblio, v string) { b.Lang = v }, []string{"citation_language", "bepress_citation_language", "dcterms.language", "dc.language", "og:locale"}},
	{func(b *HTMLBiblio, v string) { b.PDFFulltextURL = v }, []string{"citation_pdf_url", "bepress_citation_pdf_url"}},
}

// biblioLists are the fields of many values: every tag of the first name that has one.
var biblioLists = []struct {
	add   func(b *HTMLBiblio, v string)
	names []string
}{
	{func(b *HTMLBiblio, v string) { b.ContribNames = append(b.ContribNames, v) }, []string{"citation_author", "bepress_citation_author", "eprints.creators_name", "dcterms.creator", "article:author", "dc.creator", "dc.contributor"}},
	{func(b *HTMLBiblio, v string) { b.RawReferences = append(b.RawReferences, v) }, []string{"citation_reference"}},
}

// Bounds of the landing page's parse: the bytes read, the meta tags kept, a value's length.
const (
	maxBiblioBytes = 2 << 20
	maxBiblioMetas = 2000
	maxBiblioValue = 8 << 10
	maxBiblioList  = 200
)

var biblioDate = regexp.MustCompile(`^(\d{4})(?:[-/.](\d{1,2})(?:[-/.](\d{1,2}))?)?`)

// parseBiblioDate returns an ISO date (YYYY-MM-DD) from a date meta tag's value, or "" when it
// does not start with a year and month and day.
func parseBiblioDate(v string) string {
	m := biblioDate.FindStringSubmatch(strings.TrimSpace(v))
	if m == nil || m[2] == "" || m[3] == "" {
		return ""
	}
	pad := func(s string) string {
		if len(s) == 1 {
			return "0" + s
		}
		return s
	}
	return m[1] + "-" + pad(m[2]) + "-" + pad(m[3])
}

// extractBiblio reads the meta tags of an HTML document's head (at most maxBiblioBytes of it)
// into its citation metadata; nil when it has no title, as Sandcrawler keeps html_biblio only
// with one.
func extractBiblio(r io.Reader) *HTMLBiblio {
	z := html.NewTokenizer(io.LimitReader(r, maxBiblioBytes))
	z.SetMaxBuf(maxBiblioBytes)
	metas := map[string][]string{}
	n := 0
scan:
	for n < maxBiblioMetas {
		switch z.Next() {
		case html.ErrorToken:
			break scan
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			switch atom.Lookup(name) {
			case atom.Body:
				break scan
			case atom.Meta:
			default:
				continue
			}
			var key, content string
			for hasAttr {
				var k, v []byte
				k, v, hasAttr = z.TagAttr()
				switch string(k) {
				case "name", "property", "itemprop":
					if key == "" {
						key = strings.ToLower(string(v))
					}
				case "content":
					content = strings.TrimSpace(string(v))
				}
			}
			if key == "" || content == "" || len(content) > maxBiblioValue {
				continue
			}
			n++
			if len(metas[key]) < maxBiblioList {
				metas[key] = append(metas[key], content)
			}
		case html.EndTagToken:
			if name, _ := z.TagName(); atom.Lookup(name) == atom.Head {
				break scan
			}
		}
	}
	b := &HTMLBiblio{}
	for _, f := range biblioFields {
		for _, name := range f.names {
			if vs := metas[name]; len(vs) > 0 {
				f.set(b, vs[0])
				break
			}
		}
	}
	for _, f := range biblioLists {
		for _, name := range f.names {
			if vs := metas[name]; len(vs) > 0 {
				for _, v := range vs {
					f.add(b, v)
				}
				break
			}
		}
	}
	b.DOI = strings.TrimPrefix(b.DOI, "doi:")
	if b.DOI == "" {
		for _, id := range append(metas["dcterms.identifier"], metas["dc.identifier"]...) {
			if d, ok := strings.CutPrefix(id, "doi:"); ok && strings.HasPrefix(d, "10.") {
				b.DOI = d
				break
			}
			if strings.HasPrefix(id, "10.") && strings.Contains(id, "/") {
				b.DOI = id
				break
			}
		}
	}
	if b.Title == "" {
		return nil
	}
	return b
}
