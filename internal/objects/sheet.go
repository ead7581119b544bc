package objects

import (
	"bufio"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/sluice-project/sluice/internal/pathroot"
)

// Headers are the columns of an ingest sheet, all required, in Meadow's order.
var Headers = []string{"work_type", "work_accession_number", "file_accession_number", "filename", "description",
	"role", "label", "work_image", "structure"}

// optionalHeaders may follow them: a transcription (.txt) to attach to an image file set.
var optionalHeaders = []string{"transcription"}

// WorkTypes and Roles are the values a sheet's work_type and role may take.
var (
	WorkTypes = []string{"IMAGE", "AUDIO", "VIDEO"}
	Roles     = []string{"A", "P", "S", "X"}
)

// trimmed are the fields that may not have leading or trailing spaces (Meadow's ensure_trimmed).
var trimmed = []string{"work_accession_number", "file_accession_number"}

// Validation is what validating a sheet found: its status (file_fail, row_fail or valid), its
// checks, the errors of the file and every row with its own.
type Validation struct {
	Status     string
	Checks     Checks
	FileErrors []FieldError
	Rows       []Row
	// RowCount is the number of the sheet's rows checked (0 when the file fails).
	RowCount int
}

// Env is what a validation checks a sheet against.
type Env struct {
	// FilesDir is where the filename, structure and transcription columns point: a directory,
	// or an s3://bucket/prefix location, listed once ("File not Found" names the S3 key).
	FilesDir string
	// OpenS3 opens an s3:// FilesDir. Nil refuses one ([ErrNoS3]).
	OpenS3 S3Opener
	// Roots are the path roots a local FilesDir is opened through ([pathroot.Roots.OpenDir]):
	// one outside them, or reached through a link leading out, is a [*pathroot.Error]. Nil
	// opens any directory (the CLI's own validation, of a directory its user named).
	Roots *pathroot.Roots
	// Existing returns the work and file set accession numbers among those given that exist in
	// the installation. Nil means none exist.
	Existing func(ctx context.Context, works, fileSets []string) (w, f map[string]bool, err error)
}

// PlannedWork is a work a valid sheet will create, with its rows (file sets) in order.
type PlannedWork struct {
	Accession string
	WorkType  string
	Rows      []Row
}

// Works groups a valid sheet's rows into works, in the order of their first rows.
func (v *Validation) Works() []PlannedWork {
	var out []PlannedWork
	index := map[string]int{}
	for _, r := range v.Rows {
		acc := r.Fields["work_accession_number"]
		i, ok := index[acc]
		if !ok {
			i = len(out)
			index[acc] = i
			out = append(out, PlannedWork{Accession: acc, WorkType: r.Fields["work_type"]})
		}
		out[i].Rows = append(out[i].Rows, r)
	}
	return out
}

// MaxSheetBytes bounds a sheet, an untrusted upload: over it, it is a file error ([Validate]),
// and the API refuses it unread past this many bytes.
const MaxSheetBytes = 64 << 20

// maxSheetRows bounds a sheet's rows: over it, it is a file error.
const maxSheetRows = 100_000

// Validate reads an ingest sheet and checks it all — the file, then every row — reporting every
// bad row with each of its errors, not the first. It returns an error only when reading the
// sheet or asking Env.Existing fails. It holds every row in Validation.Rows; [ValidateEach]
// holds none.
func Validate(ctx context.Context, r io.Reader, env Env) (*Validation, error) {
	var rows []Row
	v, err := ValidateEach(ctx, r, env, func(row Row) error { rows = append(rows, row); return nil })
	if v != nil {
		v.Rows = rows
	}
	return v, err
}

// ValidateEach validates a sheet as [Validate] does but hands each row, checked, to each, in
// order, and keeps none: Validation.Rows stays empty and Validation.RowCount counts them. Its
// memory does not grow with the sheet's rows: the sheet is read once into a temporary file
// (the rows' fields), the rules across rows — a file accession number's uniqueness, a work's
// one work type — are decided by sorting hashes of the accession numbers in bounded runs, and
// the rows are then checked and handed on a chunk at a time (one Env.Existing call a chunk).
// Only the rows that break a rule across rows are remembered, with their row numbers. No row
// is handed on when the file fails. An error from each stops the validation and is returned.
func ValidateEach(ctx context.Context, r io.Reader, env Env, each func(Row) error) (*Validation, error) {
	v := &Validation{Checks: Checks{File: CheckPending, Rows: CheckPending, Overall: CheckPending}}
	fail := func(field, format string, args ...any) (*Validation, error) {
		v.FileErrors = append(v.FileErrors, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
		v.Status, v.Checks.File, v.Checks.Overall = StatusFileFail, CheckFail, CheckFail
		return v, nil
	}
	lr := &io.LimitedReader{R: r, N: MaxSheetBytes + 1}
	tooLarge := func() bool { return lr.N <= 0 }
	br := bufio.NewReader(lr)
	if b, _ := br.Peek(3); string(b) == "\xef\xbb\xbf" {
		_, _ = br.Discard(3)
	}
	cr := csv.NewReader(br)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	header, err := cr.Read()
	if tooLarge() {
		return fail("file", "the sheet is larger than %d MiB", MaxSheetBytes>>20)
	}
	if errors.Is(err, io.EOF) {
		return fail("file", "the sheet is empty")
	}
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return fail("file", "Invalid csv file: %v", pe)
	}
	if err != nil {
		return nil, fmt.Errorf("read sheet: %w", err)
	}
	header = slices.Clone(header)
	if msgs := checkHeader(header); len(msgs) > 0 {
		for _, m := range msgs {
			v.FileErrors = append(v.FileErrors, FieldError{Field: "header", Message: m})
		}
		v.Status, v.Checks.File, v.Checks.Overall = StatusFileFail, CheckFail, CheckFail
		return v, nil
	}
	sp, err := newSpool()
	if err != nil {
		return nil, err
	}
	defer sp.Close()
	ix := newSheetIndex()
	defer ix.close()
	col := func(rec []string, name string) string {
		if i := slices.Index(header, name); i < len(rec) {
			return rec[i]
		}
		return ""
	}
	// Rows are numbered as Meadow numbers them: the first after the header is row 1.
	n := 0
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rec, err := cr.Read()
		if tooLarge() {
			return fail("file", "the sheet is larger than %d MiB", MaxSheetBytes>>20)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if n++; n > maxSheetRows {
			return fail("file", "the sheet has more than %d rows", maxSheetRows)
		}
		if errors.As(err, &pe) {
			return fail("file", "Invalid csv file: %v", pe)
		}
		if err != nil {
			return nil, fmt.Errorf("read sheet: %w", err)
		}
		sp.write(rec)
		if err := ix.add(n, col(rec, "file_accession_number"), col(rec, "work_accession_number"), col(rec, "work_type")); err != nil {
			return nil, err
		}
	}
	if n == 0 {
		return fail("file", "the sheet has no rows")
	}
	v.Checks.File = CheckPass
	if err := ix.decide(); err != nil {
		return nil, err
	}
	files, err := openIndex(ctx, env)
	if err != nil {
		return nil, err
	}
	defer files.close()
	sr, err := sp.reader()
	if err != nil {
		return nil, err
	}
	v.Checks.Rows, v.Checks.Overall, v.Status = CheckPass, CheckPass, StatusValid
	const chunk = 1000
	rows := make([]Row, 0, chunk)
	flush := func() error {
		if err := ix.checkRows(ctx, header, files, env, rows); err != nil {
			return err
		}
		for _, row := range rows {
			if row.State == CheckFail {
				v.Checks.Rows, v.Checks.Overall, v.Status = CheckFail, CheckFail, StatusRowFail
			}
			if err := each(row); err != nil {
				return err
			}
		}
		v.RowCount += len(rows)
		rows = rows[:0]
		return nil
	}
	for i := 1; i <= n; i++ {
		rec, err := sr.next()
		if err != nil {
			return nil, fmt.Errorf("read the sheet's rows back: %w", noEOF(err))
		}
		row := Row{Row: i, Fields: make(map[string]string, len(header)+1)}
		for j, h := range header {
			if j < len(rec) {
				row.Fields[h] = rec[j]
			} else {
				row.Fields[h] = ""
			}
		}
		if len(rec) != len(header) {
			row.Errors = append(row.Errors, FieldError{Field: "row", Message: fmt.Sprintf("row: has %d fields; the header has %d", len(rec), len(header))})
		}
		if rows = append(rows, row); len(rows) == chunk {
			if err := flush(); err != nil {
				return nil, err
			}
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return v, nil
}

// checkHeader returns Meadow's messages for a header that is not the sheet's: the required
// headers missing, then the headers not known, each list in one message ("Required headers
// missing: a,b"). A header named twice is not known the second time (Meadow subtracts the known
// headers from the sheet's once each).
func checkHeader(header []string) []string {
	var missing, invalid []string
	for _, h := range Headers {
		if !slices.Contains(header, h) {
			missing = append(missing, h)
		}
	}
	seen := map[string]bool{}
	for _, h := range header {
		if seen[h] || !slices.Contains(Headers, h) && !slices.Contains(optionalHeaders, h) {
			invalid = append(invalid, h)
		}
		seen[h] = true
	}
	var msgs []string
	plural := func(n int) string {
		if n > 1 {
			return "headers"
		}
		return "header"
	}
	if len(missing) > 0 {
		msgs = append(msgs, "Required "+plural(len(missing))+" missing: "+strings.Join(missing, ","))
	}
	if len(invalid) > 0 {
		msgs = append(msgs, "Invalid "+plural(len(invalid))+": "+strings.Join(invalid, ","))
	}
	return msgs
}

// sheetIndex is what checking a row needs of the whole sheet, kept in a memory that does not
// grow with the rows: the rows whose file accession number another row has too, the works
// with more than one work type (both found by sorting 128-bit hashes of the accession numbers
// in bounded runs: two different numbers share one with a chance under 2^-100), which of a
// chunk's accession numbers exist in the installation, and a bounded cache of the files read.
type sheetIndex struct {
	seeds          [2]maphash.Seed
	accs, works    runSorter
	dupOf          map[int]int // row → its group in dupRows
	dupRows        [][]int
	conflicting    map[[2]uint64]bool // works' hashes
	existW, existF map[string]bool
	mimes          map[string]string // by clean file name: each file is read once
	vtt            map[string]string // by structure name: its message ("" when it is good)
}

// cacheLen bounds sheetIndex's caches of files read: when one is full it is emptied.
const cacheLen = 4096

func newSheetIndex() *sheetIndex {
	return &sheetIndex{seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}, dupOf: map[int]int{},
		conflicting: map[[2]uint64]bool{}, mimes: map[string]string{}, vtt: map[string]string{}}
}

func (ix *sheetIndex) close() { _ = errors.Join(ix.accs.Close(), ix.works.Close()) }

func (ix *sheetIndex) hash(s string) [2]uint64 {
	return [2]uint64{maphash.String(ix.seeds[0], s), maphash.String(ix.seeds[1], s)}
}

// add records a row's file accession number, work and work type.
func (ix *sheetIndex) add(row int, acc, work, workType string) error {
	h := ix.hash(acc)
	if err := ix.accs.add(entry{h[0], h[1], uint64(row)}); err != nil {
		return err
	}
	if workType == "" {
		return nil
	}
	w := ix.hash(work)
	return ix.works.add(entry{w[0], w[1], maphash.String(ix.seeds[0], workType)})
}

// decide finds, once every row is added, the rows whose file accession number is duplicated
// and the works with more than one work type.
func (ix *sheetIndex) decide() error {
	var group []int
	var last entry
	end := func() {
		if len(group) > 1 {
			for _, r := range group {
				ix.dupOf[r] = len(ix.dupRows)
			}
			ix.dupRows = append(ix.dupRows, slices.Clone(group))
		}
		group = group[:0]
	}
	err := ix.accs.each(func(e entry) error {
		if e.a != last.a || e.b != last.b {
			end()
		}
		last = e
		group = append(group, int(e.c))
		return nil
	})
	if err != nil {
		return err
	}
	end()
	first := true
	return ix.works.each(func(e entry) error {
		if !first && e.a == last.a && e.b == last.b && e.c != last.c {
			ix.conflicting[[2]uint64{e.a, e.b}] = true
		}
		first, last = false, e
		return nil
	})
}

// checkRows adds each row's errors and state: at most one error per field, Meadow's first, in
// the order of the sheet's columns, each as Meadow words it — "field: message" ([FieldError]).
func (ix *sheetIndex) checkRows(ctx context.Context, header []string, files fileIndex, env Env, rows []Row) error {
	ix.existW, ix.existF = nil, nil
	if env.Existing != nil {
		var works, accs []string
		for _, r := range rows {
			if w := r.Fields["work_accession_number"]; !slices.Contains(works, w) {
				works = append(works, w)
			}
			accs = append(accs, r.Fields["file_accession_number"])
		}
		slices.Sort(accs)
		var err error
		if ix.existW, ix.existF, err = env.Existing(ctx, works, slices.Compact(accs)); err != nil {
			return fmt.Errorf("look up accession numbers: %w", err)
		}
	}
	for i := range rows {
		if err := ctx.Err(); err != nil {
			return err
		}
		r := &rows[i]
		for _, field := range header {
			if msg := ix.check(ctx, files, r, field); msg != "" {
				r.Errors = append(r.Errors, FieldError{Field: field, Message: field + ": " + msg})
			}
		}
		r.State = CheckPass
		if len(r.Errors) > 0 {
			r.State = CheckFail
		}
	}
	return nil
}

// truthy and falsy are the spellings of a boolean a sheet may use (Meadow's Truth), in lower case.
var (
	truthy = []string{"true", "t", "yes", "y", "1", "-1"}
	falsy  = []string{"false", "f", "no", "n", "0"}
)

// check returns Meadow's message for a row's field, "" when it is good (Meadow's
// validate_value, clause for clause).
func (ix *sheetIndex) check(ctx context.Context, files fileIndex, r *Row, field string) string {
	value := r.Fields[field]
	role, wt := r.Fields["role"], r.Fields["work_type"]
	switch field {
	case "work_image":
		switch b := strings.ToLower(value); {
		case value == "", slices.Contains(falsy, b):
			return ""
		case slices.Contains(truthy, b) && (role == "A" || role == "X"):
			return ""
		case slices.Contains(truthy, b):
			return fmt.Sprintf("role %s cannot be a work image", role)
		}
		return "boolean type required"
	case "structure":
		if strings.TrimSpace(value) == "" {
			return ""
		}
		return ix.structure(ctx, files, value, wt)
	case "transcription": // Sluice's column: a .txt beside the structure
		if value == "" {
			return ""
		}
		if !strings.EqualFold(filepath.Ext(value), ".txt") {
			return value + " is not a .txt file"
		}
		p, msg := cleanName(value)
		if msg == "" && !files.exists(ctx, p) {
			msg = "File not Found: " + files.where(p, value)
		}
		return msg
	}
	if !slices.Contains(Headers, field) {
		return ""
	}
	if value == "" {
		return "cannot be blank"
	}
	switch field {
	case "work_type":
		work := r.Fields["work_accession_number"]
		switch {
		case ix.conflicting[ix.hash(work)]:
			return fmt.Sprintf("work %s has conflicting work_type values", work)
		case !slices.Contains(WorkTypes, value):
			return value + " is invalid"
		}
	case "role":
		if !slices.Contains(Roles, value) {
			return value + " is invalid"
		}
	case "file_accession_number":
		switch g, dup := ix.dupOf[r.Row]; {
		case dup:
			return fmt.Sprintf("%s is duplicated on rows %s", value, joinInts(ix.dupRows[g]))
		case ix.existF[value]:
			return value + " already exists in system"
		}
		return untrimmed(value)
	case "work_accession_number":
		if ix.existW[value] {
			return value + " already exists in system"
		}
		return untrimmed(value)
	case "filename":
		if bad := unsafeChars(value); bad != "" {
			return value + " contains characters that are not safe for S3 object keys: " + bad
		}
		p, msg := cleanName(value)
		if msg != "" {
			return msg
		}
		mime, seen := ix.mimes[p]
		if !seen {
			mime = files.mime(ctx, p)
			if len(ix.mimes) == cacheLen {
				clear(ix.mimes)
			}
			ix.mimes[p] = mime
		}
		if mime == "" {
			return "File not Found: " + files.where(p, value)
		}
		r.Fields["mime_type"] = mime
		if !Accepted(wt, role, mime) {
			return fmt.Sprintf("Mime-type: %s, not accepted for work type: %s and file set role: %s.", value, wt, role)
		}
	}
	return ""
}

func untrimmed(value string) string {
	if strings.TrimSpace(value) != value {
		return "cannot have leading or trailing spaces"
	}
	return ""
}

// structure returns Meadow's message for a row's structure file: one that must exist, and be
// a WebVTT file (.vtt) for an AUDIO or VIDEO work or a transcription (.txt) for an IMAGE work.
func (ix *sheetIndex) structure(ctx context.Context, files fileIndex, name, workType string) string {
	p, msg := cleanName(name)
	if msg != "" {
		return msg
	}
	if !files.exists(ctx, p) {
		return fmt.Sprintf("Structure file %s not found in %s", name, files.kind())
	}
	ext := strings.ToLower(filepath.Ext(name))
	switch {
	case ext == ".txt" && workType == "IMAGE":
		return ""
	case ext == ".vtt" && (workType == "AUDIO" || workType == "VIDEO"):
		m, seen := ix.vtt[p]
		if !seen {
			switch ok, err := files.webVTT(ctx, p); {
			case err != nil:
				m = fmt.Sprintf("The following error occurred validating %s: %v", name, err)
			case !ok:
				m = name + " is not a valid WebVTT file"
			}
			if len(ix.vtt) == cacheLen {
				clear(ix.vtt)
			}
			ix.vtt[p] = m
		}
		return m
	case ext == ".vtt" && workType == "IMAGE":
		return "IMAGE works must use .txt files for transcriptions, not .vtt files"
	case ext == ".txt" && (workType == "AUDIO" || workType == "VIDEO"):
		return workType + " works must use .vtt files for structure, not .txt files"
	}
	return fmt.Sprintf("Invalid structure file extension %s for work type %s", ext, workType)
}

// safeKeyChar reports whether S3 calls the character safe in an object key (Meadow's rule for
// a file name: letters, digits and !-_.*'()/ — no space).
func safeKeyChar(c rune) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("!-_.*'()/", c)
}

// unsafeChars returns the characters of name not safe in an object key, each once, joined by
// ", " as Meadow lists them; "" when there is none.
func unsafeChars(name string) string {
	var bad []string
	for _, c := range name {
		if !safeKeyChar(c) && !slices.Contains(bad, string(c)) {
			bad = append(bad, string(c))
		}
	}
	return strings.Join(bad, ", ")
}

// cleanName returns a sheet's file name cleaned, relative to the files location, or the message
// of one that leaves it (absolute, or through "..").
func cleanName(name string) (string, string) {
	clean := filepath.Clean(name)
	if filepath.IsAbs(name) || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", name + " points outside the files directory"
	}
	return clean, ""
}

// Accepted reports whether a file of the MIME type may be a file set of the role in a work of
// the type (Meadow's mime_type_accepted?): an access file is of the work's own medium (not a
// Matroska, VOB or MTS video, not an AIFF or x-flac audio file), an auxiliary file an image, a
// PDF or a zip, and a preservation or supplemental file anything.
func Accepted(workType, role, mime string) bool {
	switch role {
	case "P", "S":
		return true
	case "X":
		return strings.HasPrefix(mime, "image/") || mime == "application/pdf" || strings.HasPrefix(mime, "application/zip")
	case "A":
		switch workType {
		case "IMAGE":
			return strings.HasPrefix(mime, "image/")
		case "AUDIO":
			return strings.HasPrefix(mime, "audio/") && mime != "audio/x-aiff" && mime != "audio/x-flac"
		case "VIDEO":
			return strings.HasPrefix(mime, "video/") && !slices.Contains([]string{"video/x-matroska", "video/x-vob", "video/x-mts"}, mime)
		}
	}
	return false
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}
