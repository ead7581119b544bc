package api

import "net/http"

// replacedParams are the query parameters cursor replaced. A request with one is refused
// rather than answered with a first page, which its client would take for the whole list
// since it reads a next_… field no list answers.
var replacedParams = []string{"after_id", "after", "after_item"}

// cursorParam is every list's cursor query parameter.
var cursorParam = query("cursor", "string", "The next_cursor of the previous page; absent for the first page.")

// pageOf reads a list request's cursor (opaque still: the list reads its key with
// [cursor.Read]) and its limit: defaultLimit when absent, at most 1,000.
func pageOf(r *http.Request, defaultLimit int64) (string, int, error) {
	q := r.URL.Query()
	for _, name := range replacedParams {
		if q.Has(name) {
			return "", 0, errf(CodeBadRequest, "%s: lists take cursor, the next_cursor of the previous page (docs/api.md#pagination)", name)
		}
	}
	limit, err := queryInt(r, "limit", defaultLimit, 1000)
	if err != nil {
		return "", 0, err
	}
	return q.Get("cursor"), int(limit), nil
}

// badCursor is the 400 of a cursor that is not one of the list read ([cursor.ErrForeign]).
func badCursor(err error) error { return errf(CodeBadRequest, "%v", err) }
