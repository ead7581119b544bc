package cli

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sluice-project/sluice/internal/action/ingest"
	"github.com/sluice-project/sluice/internal/metadata"
	"github.com/sluice-project/sluice/internal/node"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

func runDocuments(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return usagef("documents needs a subcommand: list, show, export, search, reindex")
	}
	sub := args[0]
	switch sub {
	case "search":
		return runDocumentsSearch(ctx, e, args[1:])
	case "reindex":
		return runDocumentsReindex(ctx, e, args[1:])
	}
	fs, c := newFlags(e, "documents "+sub, "documents list [--job ID | --all-jobs] [--limit N] | show ID | export [--job ID | --all-jobs] [--format dir|jsonl] [--out DIR] [--data DIR]")
	jobFlag := fs.Int64("job", 0, "list, export: the job (default: the newest documents job)")
	allJobs := fs.Bool("all-jobs", false, "list, export: every documents job, oldest first (export: a folder job-N per job)")
	limit := fs.Int("limit", 100, "list: at most this many documents and errors (0: all)")
	format := fs.String("format", "dir", "export: dir (files, index.jsonl and errors.jsonl in --out) or jsonl (the index on stdout)")
	outDir := fs.String("out", "", "export: the directory to write to")
	partsFlag := fs.String("parts", "pdf,text,thumbnail", "export: the parts of each document to write (dir format)")
	output := addOutputFlag(fs)
	pos, err := parse(fs, args[1:])
	if err != nil {
		return err
	}
	switch sub {
	case "list", "export":
		if len(pos) != 0 {
			return usagef("documents %s takes no arguments", sub)
		}
	case "show":
		if len(pos) != 1 {
			return usagef("documents show needs one document ID")
		}
	default:
		return usagef("unknown documents subcommand %q (want list, show, export, search, reindex)", sub)
	}
	if sub == "export" {
		if !oneOf(*format, "dir", "jsonl") {
			return usagef("--format must be dir or jsonl")
		}
		if *format == "dir" && *outDir == "" {
			return usagef("export --format dir needs --out DIR")
		}
		for _, p := range strings.Split(*partsFlag, ",") {
			if !oneOf(p, "pdf", "text", "thumbnail") {
				return usagef("--parts lists pdf, text and thumbnail, not %q", p)
			}
		}
	}
	n, err := c.open(ctx, e, false)
	if err != nil {
		return err
	}
	defer n.Close()
	if sub == "show" {
		id, err := strconv.ParseInt(pos[0], 10, 64)
		if err != nil {
			return usagef("document ID must be a number, not %q", pos[0])
		}
		if output.json() {
			return showDocumentJSON(ctx, e, n, id)
		}
		return showDocument(ctx, e, n, id)
	}
	if *allJobs && *jobFlag != 0 {
		return usagef("--job and --all-jobs cannot go together")
	}
	var jobIDs []int64
	if *allJobs {
		if jobIDs, err = documentsJobs(ctx, n); err != nil {
			return err
		}
	} else {
		jobID, err := documentsJob(ctx, n, *jobFlag)
		if err != nil {
			return err
		}
		jobIDs = []int64{jobID}
	}
	switch sub {
	case "list":
		if output.json() {
			return listDocumentsJSON(ctx, e, n, jobIDs)
		}
		return listDocuments(ctx, e, n, jobIDs, *limit)
	default:
		parts := map[string]bool{}
		for _, p := range strings.Split(*partsFlag, ",") {
			parts[p] = true
		}
		if !*allJobs {
			return exportDocuments(ctx, e, n, jobIDs[0], *format, *outDir, parts)
		}
		for _, id := range jobIDs {
			dir := *outDir
			if *format == "dir" {
				dir = filepath.Join(*outDir, fmt.Sprintf("job-%d", id))
			}
			if err := exportDocuments(ctx, e, n, id, *format, dir, parts); err != nil {
				return err
			}
		}
		return nil
	}
}

// documentsJobs returns the ids of every job of the documents workflow, oldest first.
func documentsJobs(ctx context.Context, n *node.Node) ([]int64, error) {
	var ids []int64
	var after int64
	for {
		jobs, err := n.Store.JobList(ctx, store.JobListParams{Workflow: documentsWorkflow, AfterID: after, Limit: 1000})
		if err != nil {
			return nil, err
		}
		for _, j := range jobs {
			ids = append(ids, j.ID)
		}
		if len(jobs) < 1000 {
			break
		}
		after = jobs[len(jobs)-1].ID
	}
	if len(ids) == 0 {
		return nil, errors.New("no documents job in this data dir: run sluice ingest first")
	}
	slices.Reverse(ids)
	return ids, nil
}

// documentsJob returns id, or when it is 0 the newest job of the documents workflow.
func documentsJob(ctx context.Context, n *node.Node, id int64) (int64, error) {
	if id != 0 {
		if _, err := n.Store.JobGet(ctx, id); err != nil {
			return 0, fmt.Errorf("job %d: %w", id, err)
		}
		return id, nil
	}
	var after int64
	for {
		jobs, err := n.Store.JobList(ctx, store.JobListParams{AfterID: after, Limit: 100})
		if err != nil {
			return 0, err
		}
		for _, j := range jobs {
			if j.WorkflowName == documentsWorkflow {
				return j.ID, nil
			}
		}
		if len(jobs) < 100 {
			return 0, errors.New("no documents job in this data dir: run sluice ingest first")
		}
		after = jobs[len(jobs)-1].ID
	}
}

// entry is one document or error of a job, in tree order.
type entry struct {
	item *record.Item
	doc  *ingest.Document
	err  *ingest.Error
}

// eachEntry calls fn for every item of the job that has a document or an error, in the items'
// tree order (sort key), which is the same in every run of the same inputs.
func eachEntry(ctx context.Context, n *node.Node, jobID int64, fn func(en entry) error) error {
	docs := map[int64]*ingest.Document{}
	errs := map[int64]*ingest.Error{}
	err := eachOutput(ctx, n, jobID, func(o *record.Output) error {
		switch o.Kind {
		case ingest.KindDocument:
			var d ingest.Document
			if err := metadata.Unmarshal(o.Value, &d); err != nil {
				return fmt.Errorf("decode document of item %d: %w", o.ItemID, err)
			}
			docs[o.ItemID] = &d
		case ingest.KindError:
			var ev ingest.Error
			if err := json.Unmarshal(o.Value, &ev); err != nil {
				return fmt.Errorf("decode error of item %d: %w", o.ItemID, err)
			}
			errs[o.ItemID] = &ev
		}
		return nil
	})
	if err != nil {
		return err
	}
	after := ""
	for {
		items, err := n.Store.ItemList(ctx, store.ItemListParams{JobID: jobID, AfterSort: after, Limit: 2000})
		if err != nil {
			return err
		}
		for _, it := range items {
			en := entry{item: it, doc: docs[it.ID], err: errs[it.ID]}
			if en.doc == nil && en.err == nil {
				continue
			}
			if err := fn(en); err != nil {
				return err
			}
		}
		if len(items) < 2000 {
			return nil
		}
		after = items[len(items)-1].SortKey
	}
}

func listDocuments(ctx context.Context, e *env, n *node.Node, jobIDs []int64, limit int) error {
	tb := newTable([]int{3, 2}, "ID", "KIND", "TITLE", "DETAIL")
	var docs, errs, shown int
	for _, jobID := range jobIDs {
		err := eachEntry(ctx, n, jobID, func(en entry) error {
			row := func(cells ...string) {
				if limit <= 0 || shown < limit {
					tb.add(cells...)
					shown++
				}
			}
			if en.doc != nil {
				docs++
				var detail []string
				if len(jobIDs) > 1 {
					detail = append(detail, fmt.Sprintf("job %d", jobID))
				}
				if en.doc.PageNumber > 0 {
					detail = append(detail, fmt.Sprintf("page %d", en.doc.PageNumber))
				}
				if en.doc.IsFromOCR {
					detail = append(detail, "ocr")
				}
				if !en.item.HasText {
					detail = append(detail, "no text")
				}
				row(strconv.FormatInt(en.item.ID, 10), "document", printable(en.doc.Title), strings.Join(detail, ", "))
			}
			if en.err != nil {
				errs++
				row(strconv.FormatInt(en.item.ID, 10), "error", printable(en.err.Name), printable(errorReason(en.err.Message)))
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	if err := tb.write(e.stdout, width(e.stdout)); err != nil {
		return err
	}
	what := fmt.Sprintf("job %d", jobIDs[0])
	if len(jobIDs) > 1 {
		what = plural(len(jobIDs), "job")
	}
	fmt.Fprintf(e.stderr, "%s: %s, %s", what, plural(docs, "document"), plural(errs, "error"))
	if shown < docs+errs {
		fmt.Fprintf(e.stderr, "; the first %d shown (--limit N shows more, --limit 0 all)", shown)
	}
	fmt.Fprintln(e.stderr)
	return nil
}

// printable replaces control characters, which a hostile archive entry name may hold, so a name
// cannot move the terminal's cursor or break a table row.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '?'
		}
		return r
	}, s)
}

// indexEntry is one line of index.jsonl. Every field but ID is the same in two runs over the same
// inputs, so two exports can be compared once ID is dropped.
type indexEntry struct {
	ID          int64          `json:"id"`
	Title       string         `json:"title"`
	PageNumber  int            `json:"page_number,omitempty"`
	IsFromOCR   bool           `json:"is_from_ocr"`
	Metadata    map[string]any `json:"metadata"`
	ContentType string         `json:"content_type"`
	// SHA256 holds the hex SHA-256 of each part: "pdf" (the item's blob — the viewable PDF of
	// a converted leaf; "blob" when the leaf is not a PDF, such as an empty archive), "text"
	// (UTF-8) and "thumbnail".
	SHA256 map[string]string `json:"sha256"`
	// Files are the parts' paths relative to the export directory (dir format only).
	Files map[string]string `json:"files,omitempty"`
}

// errorEntry is one line of errors.jsonl.
type errorEntry struct {
	Name    string `json:"name"`
	Message string `json:"message"`
}

func showDocument(ctx context.Context, e *env, n *node.Node, id int64) error {
	it, err := n.Store.ItemGet(ctx, id)
	if err != nil {
		return store.NotFound(err, "document", id)
	}
	var doc *ingest.Document
	var docErr *ingest.Error
	err = eachOutputOfItem(ctx, n, it, func(o *record.Output) error {
		switch o.Kind {
		case ingest.KindDocument:
			doc = &ingest.Document{}
			return metadata.Unmarshal(o.Value, doc)
		case ingest.KindError:
			docErr = &ingest.Error{}
			return json.Unmarshal(o.Value, docErr)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if doc == nil && docErr == nil {
		return fmt.Errorf("item %d (%s) is neither a document nor an error (it has children, or is not ingested yet)", id, printable(it.Name))
	}
	if doc != nil {
		ie := indexFor(it, doc, it.Text)
		b, err := json.MarshalIndent(ie, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "%s\n\n%s\n", b, it.Text)
	}
	if docErr != nil {
		fmt.Fprintf(e.stdout, "error: %s: %s\n", printable(docErr.Name), docErr.Message)
	}
	return nil
}

// eachOutputOfItem calls fn with the outputs of one item.
func eachOutputOfItem(ctx context.Context, n *node.Node, it *record.Item, fn func(o *record.Output) error) error {
	outs, err := n.Store.OutputList(ctx, store.OutputListParams{JobID: it.JobID, AfterItem: it.ID - 1, Limit: 10})
	if err != nil {
		return err
	}
	for _, o := range outs {
		if o.ItemID == it.ID {
			if err := fn(o); err != nil {
				return err
			}
		}
	}
	return nil
}

func indexFor(it *record.Item, doc *ingest.Document, text string) indexEntry {
	ie := indexEntry{ID: it.ID, Title: doc.Title, PageNumber: doc.PageNumber, IsFromOCR: doc.IsFromOCR,
		Metadata: doc.Metadata, ContentType: it.ContentType, SHA256: map[string]string{}}
	if ie.Metadata == nil {
		ie.Metadata = map[string]any{}
	}
	if it.BlobSHA256 != "" {
		ie.SHA256[blobPart(it)] = it.BlobSHA256
	}
	if it.HasText {
		sum := sha256.Sum256([]byte(text))
		ie.SHA256["text"] = hex.EncodeToString(sum[:])
	}
	if it.ThumbnailSHA != "" {
		ie.SHA256["thumbnail"] = it.ThumbnailSHA
	}
	return ie
}

// blobPart names a document's blob in the index: "pdf" when it is one.
func blobPart(it *record.Item) string {
	if strings.HasPrefix(it.ContentType, "application/pdf") {
		return "pdf"
	}
	return "blob"
}

// exportDocuments writes the job's documents and errors. With format "jsonl" it prints the index
// to stdout; with "dir" it writes the chosen parts as
// documents/ROOT/NNNNNN-NAME.{pdf,txt,thumbnail.png} under out, then errors.jsonl and index.jsonl (last, so a complete index means a complete
// export). The index always holds every part's SHA-256, whichever parts are written.
func exportDocuments(ctx context.Context, e *env, n *node.Node, jobID int64, format, out string, parts map[string]bool) error {
	toDir := format == "dir"
	var index, errsOut *bufio.Writer
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	create := func(name string) (*bufio.Writer, error) {
		f, err := os.Create(filepath.Join(out, name))
		if err != nil {
			return nil, err
		}
		files = append(files, f)
		return bufio.NewWriter(f), nil
	}
	if toDir {
		if err := os.MkdirAll(filepath.Join(out, "documents"), 0o755); err != nil {
			return fmt.Errorf("create export dir: %w", err)
		}
		var err error
		if index, err = create(".index.jsonl.tmp"); err != nil {
			return err
		}
		if errsOut, err = create("errors.jsonl"); err != nil {
			return err
		}
	} else {
		index = bufio.NewWriter(e.stdout)
	}
	var docs, nerrs int
	// Documents go in a folder per root (the file or archive they came from), named for it.
	roots := map[int64]string{}
	rootDir := func(it *record.Item) (string, error) {
		id := it.RootID
		if id == 0 || id == it.ID {
			return safeName(strings.ReplaceAll(it.Name, "/", "_")), nil
		}
		if d, ok := roots[id]; ok {
			return d, nil
		}
		root, err := n.Store.ItemGet(ctx, id)
		if err != nil {
			return "", err
		}
		d := safeName(strings.ReplaceAll(root.Name, "/", "_"))
		roots[id] = d
		return d, nil
	}
	err := eachEntry(ctx, n, jobID, func(en entry) error {
		if en.err != nil {
			nerrs++
			if toDir {
				b, err := json.Marshal(errorEntry{Name: en.err.Name, Message: en.err.Message})
				if err != nil {
					return err
				}
				errsOut.Write(append(b, '\n'))
			}
		}
		if en.doc == nil {
			return nil
		}
		docs++
		text := ""
		if en.item.HasText {
			it, err := n.Store.ItemGet(ctx, en.item.ID)
			if err != nil {
				return err
			}
			text = it.Text
		}
		ie := indexFor(en.item, en.doc, text)
		if toDir {
			root, err := rootDir(en.item)
			if err != nil {
				return err
			}
			files, err := writeDocument(ctx, n, out, root, docs, en.item, en.doc.Title, text, parts)
			if err != nil {
				return fmt.Errorf("export %s: %w", printable(en.doc.Title), err)
			}
			ie.Files = files
		}
		b, err := json.Marshal(ie)
		if err != nil {
			return err
		}
		_, err = index.Write(append(b, '\n'))
		return err
	})
	if err != nil {
		return err
	}
	if err := index.Flush(); err != nil {
		return err
	}
	if !toDir {
		return nil
	}
	if err := errsOut.Flush(); err != nil {
		return err
	}
	for _, f := range files {
		if err := f.Close(); err != nil {
			return err
		}
	}
	files = nil
	if err := os.Rename(filepath.Join(out, ".index.jsonl.tmp"), filepath.Join(out, "index.jsonl")); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "exported job %d to %s: %s, %s\n", jobID, out, plural(docs, "document"), plural(nerrs, "error"))
	return nil
}

// writeDocument writes one document's parts as documents/ROOT/NNNNNN-NAME.EXT, where ROOT is
// the name of the root it came from and NNNNNN its 1-based position in the export (stable across
// runs, unique in it) and NAME its title's last element, both sanitised; it returns the parts'
// paths relative to out. No title or name can choose where a file goes.
func writeDocument(ctx context.Context, n *node.Node, out, root string, seq int, it *record.Item, title, text string, parts map[string]bool) (map[string]string, error) {
	base := fmt.Sprintf("%06d-%s", seq, safeName(title))
	if err := os.MkdirAll(filepath.Join(out, "documents", root), 0o755); err != nil {
		return nil, err
	}
	files := map[string]string{}
	write := func(part, ext string, r io.Reader) error {
		rel := "documents/" + root + "/" + base + ext
		f, err := os.Create(filepath.Join(out, filepath.FromSlash(rel)))
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, r); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		files[part] = rel
		return nil
	}
	copyBlob := func(part, ext, sha string) error {
		rc, err := n.Blobs.Open(ctx, sha)
		if err != nil {
			return err
		}
		defer rc.Close()
		return write(part, ext, rc)
	}
	if it.BlobSHA256 != "" && parts["pdf"] {
		part, ext := blobPart(it), ".pdf"
		if part != "pdf" {
			ext = ".blob"
		}
		if err := copyBlob(part, ext, it.BlobSHA256); err != nil {
			return nil, err
		}
	}
	if it.HasText && parts["text"] {
		if err := write("text", ".txt", strings.NewReader(text)); err != nil {
			return nil, err
		}
	}
	if it.ThumbnailSHA != "" && parts["thumbnail"] {
		ext := ".png"
		if it.ThumbnailType == "image/jpeg" {
			ext = ".jpg"
		}
		if err := copyBlob("thumbnail", ".thumbnail"+ext, it.ThumbnailSHA); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// safeName turns the last element of a derived path into a file name that is safe on any file
// system: no separators, no control characters, no leading dot, at most 80 bytes of valid UTF-8.
func safeName(title string) string {
	title = strings.ReplaceAll(title, "\\", "/")
	title = strings.TrimRight(title, "/")
	if i := strings.LastIndexByte(title, '/'); i >= 0 {
		title = title[i+1:]
	}
	var b strings.Builder
	for _, r := range title {
		switch {
		case r == utf8.RuneError, unicode.IsControl(r), strings.ContainsRune(`/\:*?"<>|`, r):
			b.WriteByte('_')
		default:
			b.WriteRune(r)
		}
	}
	s := strings.TrimLeft(b.String(), ". ")
	for len(s) > 80 {
		_, size := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-size]
	}
	s = strings.TrimRight(s, ". ")
	if s == "" {
		s = "document"
	}
	return s
}
