package docsearch

import (
	"context"
	"fmt"
	"strconv"

	"github.com/sluice-project/sluice/internal/search"
	"github.com/sluice-project/sluice/internal/store"
)

// RankWindow is how many matches, the most recent, [Index.Search] ranks at most.
const RankWindow = 2000

// Index is the full-text index of the documents (outputs of kind [store.OutputDocument]): one
// entry per document, made from its item's name, text, job, content type and metadata (see
// [search.Analyze] and [search.Facets]). Its queries are written per dialect over the
// [store.DomainSQL] it was made with (see [NewIndex]); its conformance suite runs on every
// driver. An Index is as safe for concurrent use as its DomainSQL.
type Index interface {
	// Add indexes the documents of the items, in the transaction of the DomainSQL, unless the
	// index has them: replaying a document's output changes nothing. The items' rows are read
	// as they are in the transaction, so text set there is indexed.
	Add(ctx context.Context, itemIDs ...int64) error
	// Search returns the documents that match a query and the filters of p, best first (by
	// rank, then item id). Ranking reads every candidate's index entry, so when more than
	// p.RankWindow documents match, only the most recent of them (by item id) are ranked and
	// returned: a query that broad is refined, not paged through.
	Search(ctx context.Context, p SearchParams) ([]*Match, error)
	// AddMissing indexes up to p.Limit documents with an item id above p.AfterItem that the
	// index lacks (documents recorded while no process indexed them), in item order. It returns
	// how many it indexed and the last item id it looked at (0 when there was none left). It
	// writes several rows: run it in a transaction.
	AddMissing(ctx context.Context, p AddMissingParams) (indexed int, last int64, err error)
	// Count counts the documents and those in the index.
	Count(ctx context.Context) (documents, indexed int64, err error)
}

// NewIndex returns the index read and written through x, in x's dialect.
func NewIndex(x store.DomainSQL) Index {
	if x.Dialect() == store.DialectPostgres {
		return postgresIndex{x}
	}
	return sqliteIndex{x}
}

// SearchParams searches the documents. Query is required; the filters are optional.
type SearchParams struct {
	Query *search.Query
	// JobID keeps the documents of one job.
	JobID int64
	// ContentType keeps the documents whose item has this content type.
	ContentType string
	// Metadata keeps the documents whose item's metadata has each key with the value, compared
	// as text (search.MetadataText: a number or boolean as JSON writes it), as the item's
	// metadata was when the document was indexed.
	Metadata []KeyValue
	// After continues after a match of an earlier page (its Rank and ItemID).
	After *Match
	// Limit is the page size. Defaults to 20.
	Limit int
	// TextChars is how many characters of each document's text to return in its match, for a
	// snippet. Zero returns none.
	TextChars int
	// RankWindow is how many of the most recent matches are ranked. Defaults to [RankWindow].
	RankWindow int
}

// KeyValue is a metadata filter.
type KeyValue struct{ Key, Value string }

// tree returns the query to run: p.Query's tree, and with filters, each filter's facet token
// (see [search.Facets]) as a word that must also match: the index holds facets with the words.
func (p SearchParams) tree() *search.Node {
	var facets []string
	if p.JobID != 0 {
		facets = append(facets, search.Facet("job", strconv.FormatInt(p.JobID, 10)))
	}
	if p.ContentType != "" {
		facets = append(facets, search.Facet("type", p.ContentType))
	}
	for _, kv := range p.Metadata {
		facets = append(facets, search.Facet("meta:"+kv.Key, kv.Value))
	}
	if len(facets) == 0 {
		return p.Query.Root
	}
	and := &search.Node{Op: search.OpAnd, Kids: []*search.Node{p.Query.Root}}
	for _, f := range facets {
		and.Kids = append(and.Kids, &search.Node{Op: search.OpTerm, Tokens: []string{f}})
	}
	return and
}

// withDefaults checks p and fills in its defaults.
func (p SearchParams) withDefaults() (SearchParams, error) {
	if p.Query == nil {
		return p, fmt.Errorf("search documents: no query")
	}
	if p.Limit <= 0 {
		p.Limit = 20
	}
	if p.RankWindow <= 0 {
		p.RankWindow = RankWindow
	}
	return p, nil
}

// Match is a document that matches a search.
type Match struct {
	ItemID      int64
	JobID       int64
	Name        string
	ContentType string
	Metadata    []byte // the item's, JSON
	Value       []byte // the document output's value, JSON
	// Rank orders matches: lower first. Its scale is the dialect's own.
	Rank float64
	// Text is the start of the document's text, SearchParams.TextChars long.
	Text string
}

// AddMissingParams indexes documents that the index lacks.
type AddMissingParams struct {
	AfterItem int64
	Limit     int // Defaults to 100.
}

// qCount is the same in both dialects.
const qCount = `SELECT (SELECT count(*) FROM outputs WHERE kind = 'document'), (SELECT count(*) FROM search_index)`

func count(ctx context.Context, x store.DomainSQL) (documents, indexed int64, err error) {
	rows, err := x.Query(ctx, qCount)
	if err != nil {
		return 0, 0, fmt.Errorf("count indexed documents: %w", err)
	}
	defer rows.Close()
	if rows.Next() {
		err = rows.Scan(&documents, &indexed)
	}
	if err == nil {
		err = rows.Err()
	}
	if err != nil {
		return 0, 0, fmt.Errorf("count indexed documents: %w", err)
	}
	return documents, indexed, nil
}
