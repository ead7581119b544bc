// Package unpack implements the `unpack` action of the documents workflow: it streams each
// regular file of an archive (zip, tar, 7z, rar, and tar or single files compressed with gzip,
// bzip2, xz, zstd, lz4, lzip, brotli, snappy, zlib or minlz) into a child item named
// "<archive name>/<entry path>", which the workflow then routes again.
//
// Entries are never written to disk by name: each entry's stream goes straight into
// [action.Output.CreateChild] (the blob store is content-addressed), through a meter that
// enforces the limits below and stops reading the moment one trips, so a bomb is never expanded
// beyond the limit and no entry is ever held whole in memory. Directories, symbolic and hard
// links, devices and other special entries are skipped.
//
// Limits, each overridable by the step's settings (`with:`):
//   - max_depth (16): an archive at nesting depth d creates children at d+1; d+1 > max_depth is
//     the permanent error "archive nested too deep: depth 17 > 16".
//   - max_entries (100,000): entries of one archive, counted before extraction for zip and 7z
//     (whose header's counts are checked before the 7z library reads them: see
//     checkSevenZipHeader) and while reading for the other formats.
//   - max_ratio (1000): compression ratio of one entry; entries that expand to less than 1 MiB
//     are never judged by ratio. For zip it is the entry's (declared, then measured) size over
//     its compressed size; tar, 7z and rar do not record per-entry compressed sizes (and solid
//     7z/rar blocks share them), so there it is the archive's expanded bytes so far over the
//     archive bytes read so far, and tripping it stops the archive.
//   - expansion_factor (20) and max_expanded_bytes (64 GiB): the expanded bytes of one archive
//     may not exceed expansion_factor × the archive's size, at most max_expanded_bytes and at
//     least min_expanded_bytes (64 MiB, so that a small archive of text, which compresses more
//     than 20:1, still unpacks). The budget is tracked per archive, not per root: a nested
//     archive gets its own budget from its own size (its expansion was already counted, as
//     bytes, against its parent's).
//
// An entry that cannot be read (encrypted, over the ratio, an unsupported method, corrupt data)
// does not stop its siblings; when the archive is done, Run returns a permanent error that
// lists the skipped entries ("2 entries skipped: a.txt: password-protected; b.bin: compression
// ratio 14000:1 exceeds 1000:1"). A corrupt or truncated archive keeps the children read so far
// and returns "corrupt archive: <the parser's message>". Children already created always stay.
//
// Zip entry names without the UTF-8 flag that are not valid UTF-8 are decoded as CP437 or
// CP866, chosen per archive (see legacyCharset); other formats' invalid names as Windows-1252.
// ISO 9660 images and CAB files are recognised by detect but not supported by the archive
// library: they fail with "unsupported archive format".
package unpack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/klauspost/compress/zip"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/bodgit/sevenzip"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/detect"
	"github.com/sluice-project/sluice/internal/action/settings"
)

// Config holds the default limits; a step's settings override them. The zero value uses the
// defaults of the documents spec.
type Config struct {
	// MaxDepth is the deepest nesting level children may have. Defaults to 16.
	MaxDepth int `with:"max_depth" doc:"deepest nesting level of archives in archives (default 16)"`
	// MaxEntries is the most entries one archive may have. Defaults to 100,000.
	MaxEntries int `with:"max_entries" doc:"most entries per archive (default 100000)"`
	// MaxRatio is the highest compression ratio of an entry. Defaults to 1000.
	MaxRatio float64 `with:"max_ratio" doc:"highest compression ratio per entry (default 1000)"`
	// RatioFloor is the expanded size under which the ratio is not checked. Defaults to 1 MiB.
	RatioFloor int64
	// ExpansionFactor bounds an archive's expanded bytes as a multiple of its size. Defaults to 20.
	ExpansionFactor float64 `with:"expansion_factor" doc:"expanded bytes per archive as a multiple of its size (default 20)"`
	// MaxExpandedBytes caps an archive's expanded bytes. Defaults to 64 GiB.
	MaxExpandedBytes int64 `with:"max_expanded_bytes" doc:"cap on expanded bytes per archive (default 64 GiB)"`
	// MinExpandedBytes is the budget of an archive whose ExpansionFactor × size is smaller.
	// Defaults to 64 MiB.
	MinExpandedBytes int64 `with:"min_expanded_bytes" doc:"floor of the expanded-bytes budget per archive (default 64 MiB)"`
}

func (c Config) withDefaults() Config {
	if c.MaxDepth <= 0 {
		c.MaxDepth = 16
	}
	if c.MaxEntries <= 0 {
		c.MaxEntries = 100_000
	}
	if c.MaxRatio <= 0 {
		c.MaxRatio = 1000
	}
	if c.RatioFloor <= 0 {
		c.RatioFloor = 1 << 20
	}
	if c.ExpansionFactor <= 0 {
		c.ExpansionFactor = 20
	}
	if c.MaxExpandedBytes <= 0 {
		c.MaxExpandedBytes = 64 << 30
	}
	if c.MinExpandedBytes <= 0 {
		c.MinExpandedBytes = 64 << 20
	}
	return c
}

type unpacker struct {
	cfg Config
}

// New returns the unpack action with cfg's limits as defaults.
func New(cfg Config) action.Action {
	return &unpacker{cfg: cfg.withDefaults()}
}

// typed declares and parses the limits a step may set (Config's tagged fields), each positive.
var typed = settings.For(Config{}.withDefaults, func(c *Config) error {
	for _, v := range []struct {
		key string
		n   float64
	}{{"max_depth", float64(c.MaxDepth)}, {"max_entries", float64(c.MaxEntries)}, {"max_ratio", c.MaxRatio},
		{"expansion_factor", c.ExpansionFactor}, {"max_expanded_bytes", float64(c.MaxExpandedBytes)}, {"min_expanded_bytes", float64(c.MinExpandedBytes)}} {
		if v.n <= 0 || math.IsInf(v.n, 0) || math.IsNaN(v.n) {
			return &action.SettingError{Key: v.key, Reason: "must be a positive number"}
		}
	}
	return nil
})

// Spec describes the action.
func (u *unpacker) Spec() action.Spec {
	w := 0.1
	return action.Spec{
		Name:           "unpack",
		Version:        "1",
		Doc:            "unpack an archive or compressed file: one child per regular file entry",
		Settings:       typed.Settings(),
		Validate:       typed.Validate,
		ProgressWeight: &w,
	}
}

// Policy caches unpack's children by the archive (the conversion cache). An archive of 100,000
// entries takes longer than any fixed timeout on a loaded machine: the timeout bounds the time
// between entries instead.
func (u *unpacker) Policy() action.Policy {
	return action.Policy{Cacheable: true, NoTempDir: true, IdleTimeout: true}
}

// run is the state of one Run.
type run struct {
	ctx    context.Context
	out    action.Output
	lim    Config
	parent string // the archive's derived name
	size   int64
	budget *budget

	head      []byte // the buffer a small entry is read into whole (see emit)
	entries   int
	emitted   int      // emit calls, resumed ones included: call i makes child i
	skipped   []string // "<entry>: <reason>"
	fatal     error    // a permanent error that stopped the archive
	outErr    error    // a failure of the output: transient
	progress  float64
	heartbeat time.Time
}

// Run unpacks the item's archive. See the package documentation for limits and errors.
func (u *unpacker) Run(ctx context.Context, t *action.Task, out action.Output) error {
	lim, err := typed.RunOver(u.cfg, t.With)
	if err != nil {
		return err
	}
	if d := t.Item.Depth + 1; d > lim.MaxDepth {
		return action.Permanentf("archive nested too deep: depth %d > %d", d, lim.MaxDepth)
	}
	p, err := t.BlobPath(ctx)
	if err != nil {
		return fmt.Errorf("blob path: %w", err)
	}
	f, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("open blob: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stat blob: %w", err)
	}
	size := st.Size()
	allow := int64(math.Min(lim.ExpansionFactor*float64(size), float64(lim.MaxExpandedBytes)))
	allow = max(allow, min(lim.MinExpandedBytes, lim.MaxExpandedBytes))
	r := &run{
		ctx: ctx, out: out, lim: lim, parent: t.Item.Name, size: size,
		budget:    &budget{max: allow, factor: lim.ExpansionFactor, size: size},
		heartbeat: time.Now(),
	}
	out.Heartbeat()
	if err := r.unpack(f, t.Item.ContentType); err != nil {
		return err
	}
	return r.result()
}

// unpack dispatches on the archive's format, found from its magic bytes.
func (r *run) unpack(f *os.File, contentType string) error {
	var head [8]byte
	n, _ := f.ReadAt(head[:], 0)
	if isZip(head[:n]) {
		return r.unpackZip(f)
	}
	return r.unpackStream(f, contentType)
}

// result turns what was recorded into Run's error.
func (r *run) result() error {
	if r.outErr != nil {
		return r.outErr
	}
	if err := r.ctx.Err(); err != nil {
		return err
	}
	var parts []string
	if r.fatal != nil {
		parts = append(parts, r.fatal.Error())
	}
	if n := len(r.skipped); n > 0 {
		const show = 10
		word := "entries"
		if n == 1 {
			word = "entry"
		}
		list := r.skipped
		more := ""
		if n > show {
			list, more = list[:show], fmt.Sprintf("; and %d more", n-show)
		}
		parts = append(parts, fmt.Sprintf("%d %s skipped: %s%s", n, word, strings.Join(list, "; "), more))
	}
	if len(parts) == 0 {
		return nil
	}
	return action.Permanent(errors.New(strings.Join(parts, "; ")))
}

// skip records an entry that could not be unpacked.
func (r *run) skip(name, reason string) {
	r.skipped = append(r.skipped, name+": "+reason)
}

// countEntry counts one entry against max_entries; false means stop.
func (r *run) countEntry() bool {
	r.entries++
	if r.entries > r.lim.MaxEntries {
		r.fatal = fmt.Errorf("archive has more than %d entries", r.lim.MaxEntries)
		return false
	}
	return true
}

// reportProgress reports consumed/size and heartbeats every few seconds.
func (r *run) reportProgress(consumed int64) {
	if r.size > 0 {
		r.reportFraction(float64(consumed) / float64(r.size))
		return
	}
	r.reportFraction(0)
}

// reportFraction reports progress f (kept if below what was reported) and heartbeats every few
// seconds.
func (r *run) reportFraction(f float64) {
	if p := math.Min(1, f); p > r.progress && !math.IsNaN(p) {
		r.progress = p
	}
	r.out.Progress(r.progress)
	if time.Since(r.heartbeat) > 5*time.Second {
		r.out.Heartbeat()
		r.heartbeat = time.Now()
	}
}

// emit streams one entry into a child. It returns false when the archive must stop (a fatal
// limit, the output failing or the context ending); an entry's own failure is recorded with
// skip and emit returns true.
func (r *run) emit(entry string, src io.Reader, ratio func(int64) error) bool {
	r.emitted++
	er := &entryReader{r: src, budget: r.budget, ratio: ratio}
	child := action.Child{Name: r.parent + "/" + entry, Blob: er}
	// A small entry is read whole here and its content type recorded, as detect would find it:
	// detect then routes the child inline, without a task of its own (the common case of an
	// archive of many small files). A larger one streams, and detect reads it later.
	if r.head == nil {
		r.head = make([]byte, detect.WholeMax+1) // reused: CreateChild reads a blob before it returns
	}
	head := r.head
	n, herr := io.ReadFull(er, head)
	switch {
	case (errors.Is(herr, io.EOF) || errors.Is(herr, io.ErrUnexpectedEOF)) && er.err == nil:
		// The entry ended (ReadFull's short read; the entry's own error would be in er.err).
		child.Blob, child.ContentType = bytes.NewReader(head[:n]), detect.Whole(head[:n], child.Name)
	default:
		// Too large for Whole, or a read error that CreateChild meets again (er keeps it).
		child.Blob = io.MultiReader(bytes.NewReader(head[:n]), er)
	}
	err := r.out.CreateChild(r.ctx, child)
	if err == nil {
		return true
	}
	if cerr := r.ctx.Err(); cerr != nil {
		r.outErr = cerr
		return false
	}
	if er.err == nil {
		// The entry read fine: the output itself failed. Retry the task.
		r.outErr = fmt.Errorf("create child %q: %w", entry, err)
		return false
	}
	var le *limitError
	if errors.As(er.err, &le) && le.fatal {
		r.fatal = fmt.Errorf("%s: %s", entry, le.msg)
		return false
	}
	r.skip(entry, entryError(er.err))
	return true
}

// entryError says what went wrong reading one entry's data: what zip's "not a valid zip file"
// means there, or [cleanError].
func entryError(err error) string {
	switch {
	case errors.Is(err, zip.ErrFormat):
		return "its data does not match the sizes the archive declares (corrupt, or its sizes lie)"
	case errors.Is(err, zip.ErrChecksum):
		return "its data does not match its checksum (corrupt)"
	}
	return cleanError(err)
}

// cleanError returns err's message without Go-internal wrapping, one line, at most 300 bytes.
func cleanError(err error) string {
	msg := err.Error()
	var re *sevenzip.ReadError
	if isPasswordError(msg) || errors.As(err, &re) && re.Encrypted {
		return "password-protected"
	}

	msg = strings.Join(strings.Fields(msg), " ")
	return truncate(msg, 300)
}

func isPasswordError(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "password") || strings.Contains(m, "encrypted")
}
