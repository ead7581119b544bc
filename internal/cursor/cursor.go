// Package cursor makes and reads page cursors: the opaque strings a list answers as
// next_cursor and takes back as cursor. A cursor names the list that made it and holds the sort
// key of the last row of its page (an id, a sort key), never an offset, so a page continues
// where the previous one ended however rows are added in between, and the same cursor reads the
// same way after a restart. A cursor is not a secret and not signed: a client that forges one
// gets the rows after the key it wrote, which it may read anyway.
package cursor

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// ErrForeign is returned for a cursor that is not one of the list being read: malformed, or
// made by another list. Its text is meant for the client that sent it.
var ErrForeign = errors.New("cursor: not a cursor of this list")

// List names a list in its cursors, with what its rows are of (job 7's roots are
// "jobs/7/items/0"), so that a cursor of one list, or of another job's, is refused by another.
// The API and the web UI name a list alike, so a cursor of one reads in the other.
type List string

// The lists of the API and the web UI.
const (
	Jobs     List = "jobs"
	Filesets List = "filesets"
	Search   List = "documents/search"
	Audit    List = "audit"
)

// Items is the list of the children of parent (0: the roots) in job.
func Items(job, parent int64) List { return List(fmt.Sprintf("jobs/%d/items/%d", job, parent)) }

// JobsSorted is the list of jobs in the order of a sort other than the newest first: by (its
// name), ascending or not. Its key is the last row's sort value and id.
func JobsSorted(by string, asc bool) List {
	dir := "desc"
	if asc {
		dir = "asc"
	}
	return List("jobs/by/" + by + "/" + dir)
}

// History is the list of job's task attempts, by task.
func History(job int64) List { return List(fmt.Sprintf("jobs/%d/history", job)) }

// Outputs is the list of job's outputs of kind (documents, errors).
func Outputs(job int64, kind string) List { return List(fmt.Sprintf("jobs/%d/%ss", job, kind)) }

// Documents is the list of the documents of job (0: every job) in an order (tree, newest,
// title, size). Its key is the last row's sort value ("" for newest) and item id.
func Documents(job int64, order string) List {
	if job == 0 {
		return List("documents/by/" + order)
	}
	return List(fmt.Sprintf("jobs/%d/documents/by/%s", job, order))
}

// Make returns the cursor of list that continues after the row whose sort key is key.
func Make(list List, key ...string) string {
	b, err := json.Marshal(append([]string{string(list)}, key...))
	if err != nil {
		panic(err) // a slice of strings always encodes
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// Read returns the key of c, a cursor of list whose key has n parts. An empty c is the first
// page: Read returns nil and no error. Any other string that Make did not return for list
// and a key of n parts is [ErrForeign].
func Read(list List, c string, n int) ([]string, error) {
	if c == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return nil, ErrForeign
	}
	var parts []string
	if err := json.Unmarshal(b, &parts); err != nil || len(parts) != n+1 || parts[0] != string(list) {
		return nil, ErrForeign
	}
	// Only the exact encoding Make writes is a cursor, so each key has one cursor.
	if Make(list, parts[1:]...) != c {
		return nil, ErrForeign
	}
	return parts[1:], nil
}

// MakeID returns the cursor of list that continues after the row with id.
func MakeID(list List, id int64) string { return Make(list, strconv.FormatInt(id, 10)) }

// ReadID returns the id of c, a cursor MakeID made for list, or 0 for an empty c (the first
// page). Any other string is [ErrForeign].
func ReadID(list List, c string) (int64, error) {
	key, err := Read(list, c, 1)
	if err != nil || key == nil {
		return 0, err
	}
	id, err := strconv.ParseInt(key[0], 10, 64)
	if err != nil || id < 1 || strconv.FormatInt(id, 10) != key[0] {
		return 0, ErrForeign
	}
	return id, nil
}
