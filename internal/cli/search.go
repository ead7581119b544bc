package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-project/sluice/internal/cursor"
	"github.com/sluice-project/sluice/internal/docsearch"
)

// stringsFlag is a flag that may be given several times.
type stringsFlag []string

func (s *stringsFlag) String() string     { return strings.Join(*s, ",") }
func (s *stringsFlag) Set(v string) error { *s = append(*s, v); return nil }

// runDocumentsSearch is `sluice documents search QUERY`.
func runDocumentsSearch(ctx context.Context, e *env, args []string) error {
	fs, c := newFlags(e, "documents search", `documents search QUERY [--job ID] [--type MIME] [--meta KEY=VALUE]… [--limit N] [--cursor CURSOR] [--output text|json]

A query is words (all must match), "exact phrases", a OR b, -excluded, prefix*, and
(groups). Case and accents are ignored; Chinese, Japanese and Korean match as substrings.`)
	job := fs.Int64("job", 0, "only the documents of this job")
	ctype := fs.String("type", "", "only documents of this content type (MIME)")
	var meta stringsFlag
	fs.Var(&meta, "meta", "only documents whose metadata has KEY=VALUE (repeatable)")
	limit := fs.Int("limit", 20, "how many hits to show")
	next := fs.String("cursor", "", "the next page: the cursor a previous search printed (its next_cursor)")
	output := fs.String("output", "text", "text or json")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("documents search needs a QUERY")
	}
	if *output != "text" && *output != "json" {
		return usagef("--output must be text or json")
	}
	req := docsearch.Request{Query: strings.Join(pos, " "), JobID: *job, ContentType: *ctype, Metadata: meta, Limit: *limit}
	after, err := cursor.Read(cursor.Search, *next, 1)
	if err != nil {
		return usagef("--cursor: %v", err)
	}
	if after != nil {
		req.Cursor = after[0]
	}
	n, err := c.open(ctx, e, false)
	if err != nil {
		return err
	}
	defer n.Close()
	res, err := docsearch.Search(ctx, n.Store, req)
	if docsearch.IsBadRequest(err) {
		return usagef("%v", err)
	}
	if err != nil {
		return err
	}
	// The page's cursor is the API's (GET /v1/documents/search): either reads the other's.
	var nextCursor string
	if res.Next != "" {
		nextCursor = cursor.Make(cursor.Search, res.Next)
	}
	if *output == "json" {
		enc := json.NewEncoder(e.stdout)
		enc.SetEscapeHTML(false)
		return enc.Encode(struct {
			Hits       []docsearch.Hit `json:"hits"`
			NextCursor string          `json:"next_cursor,omitempty"`
		}{res.Hits, nextCursor})
	}
	for i, h := range res.Hits {
		title := h.Title
		if h.Page > 0 {
			title += " (page " + strconv.Itoa(h.Page) + ")"
		}
		fmt.Fprintf(e.stdout, "%d. %s  [document %d, job %d]\n", i+1, title, h.ID, h.JobID)
		if h.Snippet != "" {
			fmt.Fprintf(e.stdout, "   %s\n", h.Snippet)
		}
	}
	switch {
	case len(res.Hits) == 0:
		fmt.Fprintln(e.stderr, "no documents found")
	case nextCursor != "":
		fmt.Fprintf(e.stderr, "more: --cursor %s\n", nextCursor)
	}
	if docs, indexed, err := docsearch.NewIndex(n.Store.DomainSQL()).Count(ctx); err == nil && indexed < docs {
		fmt.Fprintf(e.stderr, "note: %d of %d documents are not in the search index yet: run sluice documents reindex\n", docs-indexed, docs)
	}
	return nil
}

// runDocumentsReindex is `sluice documents reindex`.
func runDocumentsReindex(ctx context.Context, e *env, args []string) error {
	fs, c := newFlags(e, "documents reindex", "documents reindex [--batch N]\n\nAdds the documents the search index lacks (recorded before it existed); stop and rerun at will.")
	batch := fs.Int("batch", 200, "documents per transaction")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("documents reindex takes no arguments")
	}
	n, err := c.open(ctx, e, false)
	if err != nil {
		return err
	}
	defer n.Close()
	last := time.Now()
	pr, err := docsearch.Reindex(ctx, n.Store, *batch, func(p docsearch.ReindexProgress) {
		if time.Since(last) >= time.Second {
			last = time.Now()
			fmt.Fprintf(e.stderr, "reindex: %d of %d documents looked at, %d indexed…\n", p.Seen, p.Documents, p.Indexed)
		}
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "reindex: %d documents, %d added to the index\n", pr.Documents, pr.Indexed)
	return nil
}
