// Package docsearch is the full-text search of ingested documents, a domain of its own: the
// [Index] with its tables and queries per dialect (registered with the engine as [Domain], which
// indexes each document in the transaction that records it), and the searches the CLI, the API
// and the web pages run ([Search]): it parses the query, runs it on the index with its filters
// and a cursor, and turns each match into what a person reads — the document's title (its path),
// its page for split PDFs, and a snippet with the matched words marked.
package docsearch

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/search"
	"github.com/sluice-project/sluice/internal/store"
)

// Request is one search.
type Request struct {
	Query       string
	JobID       int64
	ContentType string
	// Metadata filters, each KEY=VALUE.
	Metadata []string
	// Limit is the page size. Defaults to 20, at most 1000.
	Limit int
	// Cursor continues after the page that returned it as Result.Next.
	Cursor string
}

// Hit is one document found.
type Hit struct {
	ID          int64           `json:"id"` // the document's item id
	JobID       int64           `json:"job_id"`
	Title       string          `json:"title"`
	Page        int             `json:"page,omitempty"`
	ContentType string          `json:"content_type"`
	Snippet     string          `json:"snippet"`
	Metadata    json.RawMessage `json:"metadata"`
}

// Result is a page of hits, best first. Next, when set, is the cursor of the next page.
type Result struct {
	Hits []Hit  `json:"hits"`
	Next string `json:"next,omitempty"`
}

// BadRequestError is a request that cannot run: a query the parser refuses, a malformed filter
// or cursor. Its message is meant for the person who made it.
type BadRequestError struct{ Err error }

func (e *BadRequestError) Error() string { return e.Err.Error() }
func (e *BadRequestError) Unwrap() error { return e.Err }

func badRequest(format string, args ...any) error {
	return &BadRequestError{fmt.Errorf(format, args...)}
}

// snippetChars is how much of each hit's text is read for its snippet: a match further in shows
// the beginning of the text instead.
const snippetChars = 100_000

type cursor struct {
	Rank float64 `json:"r"`
	ID   int64   `json:"i"`
}

// Reader is what a search reads: the index, through the store's domain SQL, and jobs.
// A [store.Store] and a [store.Executor] are Readers.
type Reader interface {
	DomainSQL() store.DomainSQL
	JobGet(ctx context.Context, id int64) (*record.Job, error)
}

// Search runs r on x. A search of a job that does not exist returns a [*store.NotFoundError]
// naming it rather than no hits.
func Search(ctx context.Context, x Reader, r Request) (*Result, error) {
	q, err := search.Parse(r.Query)
	if err != nil {
		return nil, &BadRequestError{err}
	}
	p := SearchParams{Query: q, JobID: r.JobID, ContentType: r.ContentType, Limit: r.Limit, TextChars: snippetChars}
	if p.Limit <= 0 {
		p.Limit = 20
	}
	if p.Limit > 1000 {
		return nil, badRequest("limit is at most 1000")
	}
	for _, kv := range r.Metadata {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, badRequest("a metadata filter is KEY=VALUE, not %q", kv)
		}
		p.Metadata = append(p.Metadata, KeyValue{Key: k, Value: v})
	}
	if r.Cursor != "" {
		var c cursor
		b, err := base64.RawURLEncoding.DecodeString(r.Cursor)
		if err == nil {
			err = json.Unmarshal(b, &c)
		}
		if err != nil || c.ID <= 0 {
			return nil, badRequest("the cursor %q is not one a search returned", r.Cursor)
		}
		p.After = &Match{Rank: c.Rank, ItemID: c.ID}
	}
	hits, err := NewIndex(x.DomainSQL()).Search(ctx, p)
	if err != nil {
		return nil, err
	}
	if len(hits) == 0 && r.JobID != 0 {
		// No hit in a job that does not exist says so ("job 99 does not exist").
		if _, err := x.JobGet(ctx, r.JobID); err != nil {
			return nil, store.NotFound(err, "job", r.JobID)
		}
	}
	res := &Result{Hits: make([]Hit, 0, len(hits))}
	for _, h := range hits {
		res.Hits = append(res.Hits, toHit(h, q))
	}
	if len(hits) == p.Limit {
		last := hits[len(hits)-1]
		b, err := json.Marshal(cursor{Rank: last.Rank, ID: last.ItemID})
		if err != nil {
			return nil, err
		}
		res.Next = base64.RawURLEncoding.EncodeToString(b)
	}
	return res, nil
}

func toHit(h *Match, q *search.Query) Hit {
	out := Hit{ID: h.ItemID, JobID: h.JobID, Title: h.Name, ContentType: h.ContentType, Metadata: h.Metadata,
		Snippet: search.Snippet(h.Text, q)}
	if len(out.Metadata) == 0 {
		out.Metadata = json.RawMessage("{}")
	}
	var doc struct {
		Title      string `json:"title"`
		PageNumber int    `json:"page_number"`
	}
	if json.Unmarshal(h.Value, &doc) == nil {
		if doc.Title != "" {
			out.Title = doc.Title
		}
		out.Page = doc.PageNumber
	}
	return out
}

// IsBadRequest reports whether err is a [*BadRequestError].
func IsBadRequest(err error) bool {
	var b *BadRequestError
	return errors.As(err, &b)
}

// ReindexProgress is reported by [Reindex] after each batch.
type ReindexProgress struct {
	Documents int64 // documents in the store when Reindex started
	Seen      int64 // documents looked at so far
	Indexed   int64 // documents added to the index so far
}

// Writer is what [Reindex] writes through: a store's domain SQL and its transactions. A
// [store.Store] is a Writer.
type Writer interface {
	DomainSQL() store.DomainSQL
	InTx(ctx context.Context, fn func(x store.Executor) error) error
}

// Reindex adds to the index every document it lacks — those recorded while no process indexed
// them — in batches of their own transactions, calling progress after each. Stopped at any
// point, it resumes by running again: what a batch committed is not redone.
func Reindex(ctx context.Context, st Writer, batch int, progress func(ReindexProgress)) (ReindexProgress, error) {
	docs, _, err := NewIndex(st.DomainSQL()).Count(ctx)
	if err != nil {
		return ReindexProgress{}, err
	}
	pr := ReindexProgress{Documents: docs}
	if batch <= 0 {
		batch = 100
	}
	for after := int64(0); ; {
		var n int
		var last int64
		err := st.InTx(ctx, func(x store.Executor) error {
			var err error
			n, last, err = NewIndex(x.DomainSQL()).AddMissing(ctx, AddMissingParams{AfterItem: after, Limit: batch})
			return err
		})
		if err != nil {
			return pr, err
		}
		if last == 0 {
			return pr, nil
		}
		pr.Indexed += int64(n)
		pr.Seen += int64(batch)
		if pr.Seen > pr.Documents {
			pr.Seen = pr.Documents
		}
		after = last
		if progress != nil {
			progress(pr)
		}
	}
}

// AddAllMissing adds to the index, through x, every document it lacks, in x's transaction: for
// an import that commits the documents and their index together.
func AddAllMissing(ctx context.Context, x store.DomainSQL) error {
	ix := NewIndex(x)
	for after := int64(0); ; {
		_, last, err := ix.AddMissing(ctx, AddMissingParams{AfterItem: after, Limit: 500})
		if err != nil {
			return err
		}
		if last == 0 {
			return nil
		}
		after = last
	}
}
