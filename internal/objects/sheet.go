package objects

import (
	"bufio"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
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

// required are the fields a row may not leave blank.
var required = []string{"work_type", "work_accession_number", "file_accession_number", "filename", "role"}

// trimmed are the fields that may not have leading or trailing spaces.
var trimmed = []string{"work_type", "work_accession_number", "file_accession_number", "filename", "role", "work_image",
	"structure", "transcription"}

// Validation is what validating a sheet found: its status (file_fail, row_fail or valid), its
// checks, the errors of the file and every row with its own.
type Validation struct {
	Status     string
	Checks     Checks
	FileErrors []FieldError
	Rows       []Row
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

// The bounds of a sheet, an untrusted upload: over one, it is a file error.
const (
	maxSheetBytes = 64 << 20
	maxSheetRows  = 100_000
)

// Validate reads an ingest sheet and checks it all — the file, then every row — reporting every
// bad row with each of its errors, not the first. It returns an error only when reading the
// sheet or asking Env.Existing fails.
func Validate(ctx context.Context, r io.Reader, env Env) (*Validation, error) {
	v := &Validation{Checks: Checks{File: CheckPending, Rows: CheckPending, Overall: CheckPending}}
	fail := func(field, format string, args ...any) (*Validation, error) {
		v.FileErrors = append(v.FileErrors, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
		v.Status, v.Checks.File, v.Checks.Overall = StatusFileFail, CheckFail, CheckFail
		return v, nil
	}
	lr := &io.LimitedReader{R: r, N: maxSheetBytes + 1}
	tooLarge := func() bool { return lr.N <= 0 }
	br := bufio.NewReader(lr)
	if b, _ := br.Peek(3); string(b) == "\xef\xbb\xbf" {
		_, _ = br.Discard(3)
	}
	cr := csv.NewReader(br)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = false
	header, err := cr.Read()
	if tooLarge() {
		return fail("file", "the sheet is larger than %d MiB", maxSheetBytes>>20)
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
	if msgs := checkHeader(header); len(msgs) > 0 {
		for _, m := range msgs {
			v.FileErrors = append(v.FileErrors, FieldError{Field: "header", Message: m})
		}
		v.Status, v.Checks.File, v.Checks.Overall = StatusFileFail, CheckFail, CheckFail
		return v, nil
	}
	for line := 2; ; line++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rec, err := cr.Read()
		if tooLarge() {
			return fail("file", "the sheet is larger than %d MiB", maxSheetBytes>>20)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if line-1 > maxSheetRows {
			return fail("file", "the sheet has more than %d rows", maxSheetRows)
		}
		if errors.As(err, &pe) {
			return fail("file", "Invalid csv file: %v", pe)
		}
		if err != nil {
			return nil, fmt.Errorf("read sheet: %w", err)
		}
		row := Row{Row: line, Fields: map[string]string{}}
		for i, h := range header {
			if i < len(rec) {
				row.Fields[h] = rec[i]
			} else {
				row.Fields[h] = ""
			}
		}
		if len(rec) != len(header) {
			row.Errors = append(row.Errors, FieldError{Field: "row", Message: fmt.Sprintf("has %d fields; the header has %d", len(rec), len(header))})
		}
		v.Rows = append(v.Rows, row)
	}
	if len(v.Rows) == 0 {
		return fail("file", "the sheet has no rows")
	}
	v.Checks.File = CheckPass
	files, err := openIndex(ctx, env)
	if err != nil {
		return nil, err
	}
	defer files.close()
	if err := v.checkRows(ctx, files, env); err != nil {
		return nil, err
	}
	v.Checks.Rows, v.Checks.Overall, v.Status = CheckPass, CheckPass, StatusValid
	for i := range v.Rows {
		if len(v.Rows[i].Errors) > 0 {
			v.Rows[i].State = CheckFail
			v.Checks.Rows, v.Checks.Overall, v.Status = CheckFail, CheckFail, StatusRowFail
		} else {
			v.Rows[i].State = CheckPass
		}
	}
	return v, nil
}

// checkHeader returns Meadow's messages for a header that is not the sheet's.
func checkHeader(header []string) []string {
	var msgs []string
	seen := map[string]bool{}
	for _, h := range header {
		switch {
		case seen[h]:
			msgs = append(msgs, "Duplicate header: "+h)
		case !slices.Contains(Headers, h) && !slices.Contains(optionalHeaders, h):
			msgs = append(msgs, "Invalid header: "+h)
		}
		seen[h] = true
	}
	for _, h := range Headers {
		if !seen[h] {
			msgs = append(msgs, "Required header missing: "+h)
		}
	}
	return msgs
}

// checkRows adds each row's errors.
func (v *Validation) checkRows(ctx context.Context, ix fileIndex, env Env) error {
	dupes := map[string][]int{}
	workTypes := map[string]map[string]bool{}
	var works, files []string
	for _, r := range v.Rows {
		if a := r.Fields["file_accession_number"]; a != "" {
			if len(dupes[a]) == 0 {
				files = append(files, a)
			}
			dupes[a] = append(dupes[a], r.Row)
		}
		if a := r.Fields["work_accession_number"]; a != "" {
			if workTypes[a] == nil {
				workTypes[a] = map[string]bool{}
				works = append(works, a)
			}
			if t := r.Fields["work_type"]; t != "" {
				workTypes[a][t] = true
			}
		}
	}
	var existW, existF map[string]bool
	if env.Existing != nil {
		var err error
		if existW, existF, err = env.Existing(ctx, works, files); err != nil {
			return fmt.Errorf("look up accession numbers: %w", err)
		}
	}
	mimes := map[string]string{}
	for i := range v.Rows {
		r := &v.Rows[i]
		add := func(field, format string, args ...any) {
			r.Errors = append(r.Errors, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
		}
		bad := map[string]bool{} // fields with an error that makes their other checks moot
		for _, f := range required {
			if strings.TrimSpace(r.Fields[f]) == "" {
				add(f, "cannot be blank")
				bad[f] = true
			}
		}
		for _, f := range trimmed {
			if val, ok := r.Fields[f]; ok && !bad[f] && val != strings.TrimSpace(val) {
				add(f, "cannot have leading or trailing spaces")
				bad[f] = true
			}
		}
		wt, role := r.Fields["work_type"], r.Fields["role"]
		if !bad["work_type"] && !slices.Contains(WorkTypes, wt) {
			add("work_type", "%s is invalid", wt)
			bad["work_type"] = true
		}
		if !bad["role"] && !slices.Contains(Roles, role) {
			add("role", "%s is invalid", role)
			bad["role"] = true
		}
		if wi := strings.ToLower(r.Fields["work_image"]); !bad["work_image"] && wi != "" && wi != "true" && wi != "false" {
			add("work_image", "%s is invalid", r.Fields["work_image"])
		}
		work, acc := r.Fields["work_accession_number"], r.Fields["file_accession_number"]
		if !bad["work_type"] && len(workTypes[work]) > 1 {
			add("work_type", "work %s has conflicting work_type values", work)
			bad["work_type"] = true
		}
		if !bad["file_accession_number"] {
			if rows := dupes[acc]; len(rows) > 1 {
				add("file_accession_number", "%s is duplicated on rows %s", acc, joinInts(rows))
			}
			if existF[acc] {
				add("file_accession_number", "%s already exists in system", acc)
			}
		}
		if !bad["work_accession_number"] && existW[work] {
			add("work_accession_number", "%s already exists in system", work)
		}
		if !bad["filename"] {
			if m := checkFile(ctx, r.Fields["filename"], ix, mimes, !bad["work_type"] && !bad["role"], wt, role, add); m != "" {
				r.Fields["mime_type"] = m
			}
		}
		v.checkStructure(ctx, r, ix, wt, role, bad, add)
	}
	return nil
}

// checkFile checks that a row's file is safely named, exists, and has a MIME type accepted for
// the work type and role (when both are valid).
func checkFile(ctx context.Context, name string, files fileIndex, mimes map[string]string, typed bool, wt, role string, add func(string, string, ...any)) (mime string) {
	clean, ok := safeName(name, func(format string, args ...any) { add("filename", format, args...) })
	if !ok {
		return ""
	}
	mime, seen := mimes[clean]
	if !seen {
		mime = files.mime(ctx, clean)
		mimes[clean] = mime
	}
	if mime == "" {
		add("filename", "File not Found: %s", files.where(clean, name))
	} else if typed && !Accepted(wt, role, mime) {
		add("filename", "Mime-type: %s, not accepted for work type %s and file set role %s", mime, wt, role)
	}
	return mime
}

// checkStructure checks a row's structure (WebVTT) and transcription (.txt) files.
func (v *Validation) checkStructure(ctx context.Context, r *Row, files fileIndex, wt, role string, bad map[string]bool, add func(string, string, ...any)) {
	if s := r.Fields["structure"]; s != "" && !bad["structure"] {
		switch {
		case role != "A" || (wt != "VIDEO" && wt != "AUDIO"):
			add("structure", "%s: a structure is only allowed on an access (A) file set of an AUDIO or VIDEO work", s)
		case !strings.EqualFold(filepath.Ext(s), ".vtt"):
			add("structure", "%s is not a .vtt file", s)
		default:
			if p, ok := safeName(s, func(format string, args ...any) { add("structure", format, args...) }); ok {
				if ok, err := files.webVTT(ctx, p); err != nil {
					add("structure", "File not Found: %s", files.where(p, s))
				} else if !ok {
					add("structure", "%s is not a valid WebVTT file", s)
				}
			}
		}
	}
	if s := r.Fields["transcription"]; s != "" && !bad["transcription"] {
		if !strings.EqualFold(filepath.Ext(s), ".txt") {
			add("transcription", "%s is not a .txt file", s)
		} else if p, ok := safeName(s, func(format string, args ...any) { add("transcription", format, args...) }); ok {
			if !files.exists(ctx, p) {
				add("transcription", "File not Found: %s", files.where(p, s))
			}
		}
	}
}

// safeNameChars are the characters a file name may have: those S3 calls safe in an object key,
// and the space.
func safeNameChar(c rune) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("!-_.*'()/ ", c)
}

// safeName returns a sheet's file name cleaned, relative to the files location, or reports why
// it is unsafe.
func safeName(name string, add func(format string, args ...any)) (string, bool) {
	var unsafe []string
	for _, c := range name {
		if !safeNameChar(c) && !slices.Contains(unsafe, strconv.QuoteRune(c)) {
			unsafe = append(unsafe, strconv.QuoteRune(c))
		}
	}
	if len(unsafe) > 0 {
		add("%s has unsafe characters for a file name: %s", name, strings.Join(unsafe, " "))
		return "", false
	}
	clean := filepath.Clean(name)
	if filepath.IsAbs(name) || clean == ".." || strings.HasPrefix(clean, "../") {
		add("%s points outside the files directory", name)
		return "", false
	}
	return clean, true
}

// Accepted reports whether a file of the MIME type may be a file set of the role in a work of
// the type (Meadow's rule): access and preservation files are of the work's own medium,
// auxiliary files are images, PDFs or zips, and supplemental files anything.
func Accepted(workType, role, mime string) bool {
	switch role {
	case "S":
		return true
	case "X":
		return strings.HasPrefix(mime, "image/") || mime == "application/pdf" || strings.HasPrefix(mime, "application/zip")
	case "A", "P":
		switch workType {
		case "IMAGE":
			return strings.HasPrefix(mime, "image/")
		case "AUDIO":
			return strings.HasPrefix(mime, "audio/")
		case "VIDEO":
			return strings.HasPrefix(mime, "video/")
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
