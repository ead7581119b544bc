package web

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/sluice-project/sluice/internal/cursor"
	"github.com/sluice-project/sluice/internal/docsearch"
	"github.com/sluice-project/sluice/internal/search"
	"github.com/sluice-project/sluice/internal/store"
)

// snippetPart is a run of a search hit's snippet, marked when it matched the query.
type snippetPart struct {
	Text string
	Mark bool
}

// searchHit is a hit as the search page shows it.
type searchHit struct {
	docsearch.Hit
	Parts []snippetPart
}

// searchPage searches the documents' text (the query language of `sluice documents search`),
// optionally within one job, and shows each hit's title, page and snippet with the matched words
// marked — as <mark> elements, the text escaped like every other.
func (w *Web) searchPage(rw http.ResponseWriter, r *http.Request, s *session) error {
	q := r.URL.Query()
	data := struct {
		Query, Error string
		JobID        int64
		Type, Meta   string
		Hits         []searchHit
		// More is the address of the next page; empty on the last one.
		More     string
		Searched bool
	}{Query: strings.TrimSpace(q.Get("q")), Type: strings.TrimSpace(q.Get("type")), Meta: strings.TrimSpace(q.Get("meta"))}
	data.JobID, _ = strconv.ParseInt(q.Get("job"), 10, 64)
	status := http.StatusOK
	if data.Query != "" {
		data.Searched = true
		req := docsearch.Request{Query: data.Query, JobID: data.JobID, ContentType: data.Type, Limit: 20}
		if data.Meta != "" {
			req.Metadata = []string{data.Meta}
		}
		after, err := cursor.Read(cursor.Search, q.Get("cursor"), 1)
		if after != nil {
			req.Cursor = after[0]
		}
		var res *docsearch.Result
		if err == nil {
			res, err = docsearch.Search(r.Context(), w.rec, req)
		}
		switch {
		case errors.Is(err, cursor.ErrForeign):
			data.Error, status = err.Error(), http.StatusBadRequest
		case docsearch.IsBadRequest(err):
			data.Error, status = err.Error(), http.StatusBadRequest
		case errors.Is(err, store.ErrNotFound): // the job searched does not exist
			data.Error, status = err.Error(), http.StatusNotFound
		case err != nil:
			return err
		default:
			for _, h := range res.Hits {
				data.Hits = append(data.Hits, searchHit{Hit: h, Parts: snippetParts(h.Snippet)})
			}
			if res.Next != "" {
				more := url.Values{"q": {data.Query}, "cursor": {cursor.Make(cursor.Search, res.Next)}}
				for k, v := range map[string]string{"type": data.Type, "meta": data.Meta} {
					if v != "" {
						more.Set(k, v)
					}
				}
				if data.JobID != 0 {
					more.Set("job", strconv.FormatInt(data.JobID, 10))
				}
				data.More = "/search?" + more.Encode()
			}
		}
	}
	title := "Search"
	if data.Query != "" {
		title = "Search: " + data.Query
	}
	w.render(rw, r, status, "search", s, pageData{Title: title, Nav: "search", Data: data})
	return nil
}

// snippetParts splits a snippet at its «marks».
func snippetParts(s string) []snippetPart {
	var parts []snippetPart
	for s != "" {
		i := strings.Index(s, search.MarkStart)
		if i < 0 {
			parts = append(parts, snippetPart{Text: s})
			break
		}
		if i > 0 {
			parts = append(parts, snippetPart{Text: s[:i]})
		}
		s = s[i+len(search.MarkStart):]
		j := strings.Index(s, search.MarkEnd)
		if j < 0 {
			parts = append(parts, snippetPart{Text: s, Mark: true})
			break
		}
		parts = append(parts, snippetPart{Text: s[:j], Mark: true})
		s = s[j+len(search.MarkEnd):]
	}
	return parts
}
