package docsearch

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/sluice-project/sluice/internal/search"
	"github.com/sluice-project/sluice/internal/store"
)

// postgresIndex is the index as tsvectors: search_index, one row per document with a GIN index,
// and search_chunks for the phrases of long documents (see the migration).
type postgresIndex struct{ x store.DomainSQL }

// Limits of a tsvector: positions run up to 16383 (larger ones become 16383) and a lexeme is
// at most 2046 bytes long.
const (
	maxTSPosition = 16383
	maxLexemeLen  = 2046
)

// tsvector returns the tsvector literal of a document: the title's tokens at weight A from
// position 1, the body's after a gap (so no phrase spans the two), each lexeme with at most 256
// positions. lossy reports positions it could not keep (see the migration). Building it here
// rather than with to_tsvector keeps PostgreSQL's parser out of it: the tokens are exactly
// search.Analyze's, as in the SQLite index.
func tsvector(title, body, facets []string) (lit string, lossy bool) {
	type entry struct {
		pos []int
		a   []bool
	}
	lex := map[string]*entry{}
	var order []string
	add := func(tok string, pos int, a bool) {
		if len(tok) > maxLexemeLen {
			return
		}
		e := lex[tok]
		if e == nil {
			e = &entry{}
			lex[tok] = e
			order = append(order, tok)
		}
		if pos > maxTSPosition || len(e.pos) >= 256 {
			lossy = true
			pos = min(pos, maxTSPosition)
			if len(e.pos) >= 256 || len(e.pos) > 0 && e.pos[len(e.pos)-1] == pos {
				return
			}
		}
		e.pos = append(e.pos, pos)
		e.a = append(e.a, a)
	}
	for i, tok := range title {
		add(tok, i+1, true)
	}
	for i, tok := range body {
		add(tok, len(title)+2+i, false)
	}
	var b strings.Builder
	for _, f := range facets {
		// A facet has no position: no phrase includes it.
		if lex[f] == nil {
			b.WriteString(quoteLexeme(f) + " ")
		}
	}
	for i, tok := range order {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(quoteLexeme(tok))
		b.WriteByte(':')
		e := lex[tok]
		for j, p := range e.pos {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(p))
			if e.a[j] {
				b.WriteByte('A')
			}
		}
	}
	return b.String(), lossy
}

// Chunks of a lossy document's body: phrases of up to chunkOverlap+1 tokens are whole in one.
const (
	chunkLen     = 1000
	chunkOverlap = 31
)

// chunks returns the tsvectors of the body's chunks. A chunk ends after chunkLen tokens, or
// before a token's 257th time in it, so that each keeps every position; the next begins
// chunkOverlap tokens before its end.
func chunks(body []string) []string {
	var out []string
	for start := 0; start < len(body); {
		count := map[string]int{}
		end := start
		for end < len(body) && end-start < chunkLen && count[body[end]] < 256 {
			count[body[end]]++
			end++
		}
		lit, _ := tsvector(nil, body[start:end], nil)
		out = append(out, lit)
		if end == len(body) {
			break
		}
		start = max(start+1, end-chunkOverlap)
	}
	return out
}

func quoteLexeme(tok string) string {
	return "'" + strings.ReplaceAll(strings.ReplaceAll(tok, `\`, `\\`), `'`, `''`) + "'"
}

// tsquery renders a query tree as a tsquery literal.
func tsquery(n *search.Node) string {
	switch n.Op {
	case search.OpTerm, search.OpPhrase:
		parts := make([]string, len(n.Tokens))
		for i, tok := range n.Tokens {
			parts[i] = quoteLexeme(tok)
		}
		if n.Prefix {
			parts[len(parts)-1] += ":*"
		}
		if len(parts) == 1 {
			return parts[0]
		}
		return "(" + strings.Join(parts, " <-> ") + ")"
	case search.OpOr, search.OpAnd:
		sep := " | "
		if n.Op == search.OpAnd {
			sep = " & "
		}
		parts := make([]string, len(n.Kids))
		for i, k := range n.Kids {
			parts[i] = tsquery(k)
		}
		return "(" + strings.Join(parts, sep) + ")"
	case search.OpNot:
		return "!" + tsquery(n.Kids[0])
	}
	panic(fmt.Sprintf("search: unknown node %d", n.Op))
}

const (
	qIndexInsert = `INSERT INTO search_index (item_id, tsv, lossy) SELECT * FROM unnest($1::bigint[], $2::tsvector[], $3::boolean[])
		ON CONFLICT (item_id) DO UPDATE SET tsv = EXCLUDED.tsv, lossy = EXCLUDED.lossy`
	qChunksInsert = `INSERT INTO search_chunks (item_id, chunk, tsv) SELECT * FROM unnest($1::bigint[], $2::integer[], $3::tsvector[])
		ON CONFLICT (item_id, chunk) DO UPDATE SET tsv = EXCLUDED.tsv`
	// qPostgresDocs reads what documents' entries are made from, and whether the index has
	// them; the ids go through ARRAY(…) so that the items are found by their primary key.
	qPostgresDocs = `SELECT i.id, i.name, COALESCE(i.text, ''), i.job_id, i.content_type, i.metadata,
		EXISTS (SELECT 1 FROM search_index s WHERE s.item_id = i.id) FROM items i WHERE i.id = ANY (ARRAY(SELECT unnest($1::bigint[])))`
)

// indexDoc is what a document's index rows are made from: its item's columns.
type indexDoc struct {
	id          int64
	name, text  string
	jobID       int64
	contentType string
	metadata    []byte
}

// add adds documents to search_index (and the chunks of lossy ones).
func (s postgresIndex) add(ctx context.Context, docs []indexDoc) error {
	ids := make([]int64, len(docs))
	tsvs := make([]string, len(docs))
	lossy := make([]bool, len(docs))
	var cids []int64
	var cnos []int32
	var ctsvs []string
	for i, doc := range docs {
		d := search.Analyze(doc.name, doc.text)
		ids[i] = doc.id
		tsvs[i], lossy[i] = tsvector(d.Title, d.Body, search.Facets(doc.jobID, doc.contentType, doc.metadata))
		if lossy[i] {
			for j, c := range chunks(d.Body) {
				cids, cnos, ctsvs = append(cids, doc.id), append(cnos, int32(j)), append(ctsvs, c)
			}
		}
	}
	// Nothing reads what these return: in a transaction they go out with its next statement.
	what := fmt.Sprintf("index %d documents", len(docs))
	if err := s.x.ExecLater(ctx, what, qIndexInsert, ids, tsvs, lossy); err != nil {
		return err
	}
	if len(cids) > 0 {
		return s.x.ExecLater(ctx, what, qChunksInsert, cids, cnos, ctsvs)
	}
	return nil
}

func (s postgresIndex) Add(ctx context.Context, itemIDs ...int64) error {
	ids := slices.Clone(itemIDs)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if len(ids) == 0 {
		return nil
	}
	what := fmt.Sprintf("index document %d", ids[0])
	if len(ids) > 1 {
		what = fmt.Sprintf("index %d documents", len(ids))
	}
	rows, err := s.x.Query(ctx, qPostgresDocs, ids)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	var docs []indexDoc
	found := 0
	for rows.Next() {
		var d indexDoc
		var indexed bool
		if err = rows.Scan(&d.id, &d.name, &d.text, &d.jobID, &d.contentType, &d.metadata, &indexed); err != nil {
			break
		}
		found++
		if !indexed {
			docs = append(docs, d)
		}
	}
	rows.Close()
	if err == nil {
		err = rows.Err()
	}
	if err == nil && found < len(ids) {
		err = store.ErrNotFound
	}
	if err == nil && len(docs) > 0 {
		err = s.add(ctx, docs)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// params numbers a statement's parameters as they are added.
type params struct{ args []any }

func (w *params) next(arg any) string {
	w.args = append(w.args, arg)
	return "$" + strconv.Itoa(len(w.args))
}

func (s postgresIndex) Search(ctx context.Context, p SearchParams) ([]*Match, error) {
	p, err := p.withDefaults()
	if err != nil {
		return nil, err
	}
	w := &params{}
	// Filters are facet tokens that must match too.
	root := p.tree()
	q := w.next(tsquery(root)) // $1
	match := "s.tsv @@ " + q + "::tsquery"
	if hasPhrase(root) {
		// The exact query ($1) may miss a phrase in a lossy document: the index finds the
		// candidates by the query with phrases relaxed to their words, and each phrase is
		// checked in the chunks where the document-wide tsv cannot confirm it.
		match = "s.tsv @@ " + w.next(relaxed(root)) + "::tsquery AND " + phraseExpr(root, w)
	}
	// ts_rank is higher for better hits; Rank is lower for them.
	rank := "-ts_rank(s.tsv, " + q + "::tsquery)::float8"
	cursor := "true"
	if p.After != nil {
		cursor = "(" + rank + ", s.item_id) > (" + w.next(p.After.Rank) + ", " + w.next(p.After.ItemID) + ")"
	}
	text := "''"
	if p.TextChars > 0 {
		text = "COALESCE(left(i.text, " + strconv.Itoa(p.TextChars) + "), '')"
	}
	// The page's text is read after the LIMIT, so the sort does not carry every match's text.
	// Ranking detoasts each candidate's tsv: only the window of the most recent matches is
	// ranked, found by the GIN index without reading a tsv. "+ 0" keeps the planner from
	// walking the primary key backwards testing each row's tsv, which it picks when it
	// expects many matches and which reads every row when there are few (a filter's facets).
	sql := `WITH m AS MATERIALIZED (SELECT s.item_id FROM search_index s WHERE ` + match + `
			ORDER BY s.item_id + 0 DESC LIMIT ` + w.next(p.RankWindow) + `)
		SELECT h.item_id, h.rank, i.job_id, i.name, i.content_type, i.metadata, o.value, ` + text + `
		FROM (SELECT s.item_id, ` + rank + ` AS rank FROM search_index s JOIN m ON m.item_id = s.item_id
			WHERE ` + cursor + ` ORDER BY rank, s.item_id LIMIT ` + w.next(p.Limit) + `) h
		JOIN items i ON i.id = h.item_id JOIN outputs o ON o.item_id = h.item_id AND o.kind = 'document'
		ORDER BY h.rank, h.item_id`
	rows, err := s.x.Query(ctx, sql, w.args...)
	if err != nil {
		return nil, fmt.Errorf("search documents: %w", err)
	}
	defer rows.Close()
	var hits []*Match
	for rows.Next() {
		h := &Match{}
		if err := rows.Scan(&h.ItemID, &h.Rank, &h.JobID, &h.Name, &h.ContentType, &h.Metadata, &h.Value, &h.Text); err != nil {
			return nil, fmt.Errorf("search documents: %w", err)
		}
		hits = append(hits, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("search documents: %w", err)
	}
	return hits, nil
}

func hasPhrase(n *search.Node) bool {
	return n.Op == search.OpPhrase || slices.ContainsFunc(n.Kids, hasPhrase)
}

// relaxed renders n as a tsquery that every document n matches may match: phrases become their
// words, exclusions are left out.
func relaxed(n *search.Node) string {
	switch n.Op {
	case search.OpPhrase:
		parts := make([]string, len(n.Tokens))
		for i, tok := range n.Tokens {
			parts[i] = quoteLexeme(tok)
		}
		if n.Prefix {
			parts[len(parts)-1] += ":*"
		}
		return "(" + strings.Join(parts, " & ") + ")"
	case search.OpAnd, search.OpOr:
		sep := " | "
		if n.Op == search.OpAnd {
			sep = " & "
		}
		var parts []string
		for _, k := range n.Kids {
			if k.Op != search.OpNot {
				parts = append(parts, relaxed(k))
			}
		}
		return "(" + strings.Join(parts, sep) + ")"
	}
	return tsquery(n)
}

// phraseExpr renders n as an SQL condition on s (search_index) that checks phrases in the
// chunks of lossy documents.
func phraseExpr(n *search.Node, w *params) string {
	switch n.Op {
	case search.OpTerm:
		return "s.tsv @@ " + w.next(tsquery(n)) + "::tsquery"
	case search.OpPhrase:
		q := w.next(tsquery(n))
		return "(s.tsv @@ " + q + "::tsquery OR s.lossy AND EXISTS (SELECT 1 FROM search_chunks c WHERE c.item_id = s.item_id AND c.tsv @@ " + q + "::tsquery))"
	case search.OpNot:
		return "NOT " + phraseExpr(n.Kids[0], w)
	}
	sep := " OR "
	if n.Op == search.OpAnd {
		sep = " AND "
	}
	parts := make([]string, len(n.Kids))
	for i, k := range n.Kids {
		parts[i] = phraseExpr(k, w)
	}
	return "(" + strings.Join(parts, sep) + ")"
}

func (s postgresIndex) AddMissing(ctx context.Context, p AddMissingParams) (int, int64, error) {
	if p.Limit <= 0 {
		p.Limit = 100
	}
	rows, err := s.x.Query(ctx, `SELECT o.item_id, s.item_id IS NULL, i.name, CASE WHEN s.item_id IS NULL THEN COALESCE(i.text, '') ELSE '' END,
			i.job_id, i.content_type, i.metadata
		FROM outputs o JOIN items i ON i.id = o.item_id LEFT JOIN search_index s ON s.item_id = o.item_id
		WHERE o.kind = 'document' AND o.item_id > $1 ORDER BY o.item_id LIMIT $2`, p.AfterItem, p.Limit)
	if err != nil {
		return 0, 0, fmt.Errorf("index missing documents: %w", err)
	}
	var docs []indexDoc
	var last int64
	for rows.Next() {
		var d indexDoc
		var miss bool
		if err := rows.Scan(&d.id, &miss, &d.name, &d.text, &d.jobID, &d.contentType, &d.metadata); err != nil {
			rows.Close()
			return 0, 0, fmt.Errorf("index missing documents: %w", err)
		}
		last = d.id
		if miss {
			docs = append(docs, d)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, 0, fmt.Errorf("index missing documents: %w", err)
	}
	if len(docs) > 0 {
		if err := s.add(ctx, docs); err != nil {
			return 0, 0, fmt.Errorf("index missing documents: %w", err)
		}
	}
	return len(docs), last, nil
}

func (s postgresIndex) Count(ctx context.Context) (documents, indexed int64, err error) {
	return count(ctx, s.x)
}
