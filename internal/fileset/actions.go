package fileset

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/settings"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/metadata"
	"github.com/sluice-project/sluice/internal/store"
)

// The events of the fileset workflow's actions.
const (
	EventNew        = "fileset.new"         // no existing result: ingest the request
	EventLanding    = "landing.ok"          // the landing page answered
	EventMatched    = "platform.matched"    // a platform step matched the request's URL
	EventPlatform   = "platform.found"      // the manifest step read the dataset's manifest
	EventFileResult = "fileset.file-result" // a single-file success: a dataset-file result exists
)

// The metadata keys the actions keep their findings under.
const (
	mdRequest    = "request"
	mdStatus     = "fileset_status"
	mdError      = "fileset_error"
	mdExisting   = "fileset_existing"
	mdTerminal   = "fileset_terminal"
	mdBiblio     = "fileset_html_biblio"
	mdPlatform   = "fileset_platform"
	mdMatch      = "fileset_match" // the platform that matched, and the URL it matched
	mdStrategy   = "fileset_strategy"
	mdRole       = "fileset_role"
	mdFile       = "fileset_file"
	mdFileResult = "fileset_file_result"
	mdFilesStep  = "fileset_files_step" // the step that made the file items
	mdHost       = "host"
	mdGeneration = "fileset_generation"     // of the ingest_fileset_platform row check-existing found
	mdClaim      = "fileset_claim"          // a file's download claim (claimKey)
	mdUnsized    = "fileset_unsized_budget" // bytes each file without a declared size may download
	mdBundle     = "fileset_bundle"         // a file item that is the dataset's bundle
	mdLanding    = "fileset_landing"        // the landing page's capture: its file_meta and CDX line
)

// The output kinds of the result step.
const (
	KindResult     = "fileset_result"
	KindFileResult = "dataset_file_result"
)

// StrategyEvent is the event the limits step fires for a strategy.
func StrategyEvent(strategy string) string { return "strategy." + strategy }

// Strategies lists the strategies that have a step.
var Strategies = []string{StrategyWebFile, StrategyWebFileset, StrategyArchiveorgFile, StrategyArchiveorgFileset,
	StrategyWebFilesetBundled, StrategyArchiveorgFilesetBundled}

func bundled(strategy string) bool { return strings.HasSuffix(strategy, "-bundled") }

func decodeMD(md map[string]any, key string, into any) bool {
	v, ok := md[key]
	if !ok || v == nil {
		return false
	}
	b, err := json.Marshal(v)
	if err != nil {
		return false
	}
	return metadata.Unmarshal(b, into) == nil
}

// asMap turns a value into JSON-shaped metadata, its numbers as written ([metadata.Unmarshal]).
func asMap(v any) any {
	b, _ := json.Marshal(v)
	var m any
	_ = metadata.Unmarshal(b, &m)
	return m
}

// requestObject is a root's request: its metadata.request — as a requests file, POST
// /v1/filesets or a wrapped message ({"request": {…}}) gives it — or, for a bare Sandcrawler
// request that a source merged into the root's metadata, the metadata's own keys (not the
// source's, the workflow's or the engine's). Nil when there is neither.
func requestObject(md map[string]any) map[string]any {
	if r, ok := md[mdRequest].(map[string]any); ok {
		return r
	}
	if _, ok := md["base_url"]; !ok {
		return nil
	}
	r := map[string]any{}
	for k, v := range md {
		if k == "source" || k == "body" || k == mdHost || k == mdRequest || strings.HasPrefix(k, "source_") || strings.HasPrefix(k, "fileset_") {
			continue
		}
		r[k] = v
	}
	return r
}

func request(it action.Item) Request {
	var r Request
	if obj := requestObject(it.Metadata); obj != nil {
		b, _ := json.Marshal(obj)
		_ = json.Unmarshal(b, &r)
	}
	if r.IngestType == "" {
		r.IngestType = "dataset"
	}
	return r
}

// conclude decides the request's status before any download: no event of a later step fires,
// and the result step, once children.done fires, reports it.
func conclude(out action.Output, status, msg string) {
	out.SetMetadata(map[string]any{mdStatus: status, mdError: capError(msg)})
}

// concludeErr concludes with a status error's status, or returns another error.
func concludeErr(out action.Output, err error) error {
	if st, msg, ok := asStatus(err); ok {
		conclude(out, st, msg)
		return nil
	}
	return err
}

type existingAction struct{ s *Fileset }

func (a existingAction) Spec() action.Spec {
	return action.Spec{Name: "fileset-existing", Doc: "a request already archived is success-existing (ingest_fileset_platform, its blobs present)",
		Outcomes: []string{EventNew}, Concurrency: 8}
}

// Policy runs the action without a temporary directory.
func (a existingAction) Policy() action.Policy { return action.Policy{NoTempDir: true} }

func (a existingAction) Run(ctx context.Context, t *action.Task, out action.Output) error {
	req := request(t.Item)
	if req.BaseURL == "" {
		conclude(out, StatusSkipURLBlocklist, "the request has no base_url")
		return nil
	}
	reads, err := engine.ReadsOf(ctx)
	if err != nil {
		return err
	}
	var row *Row
	err = reads.Query(ctx, DomainName, readResult, resultKey{req.IngestType, req.BaseURL}, &row)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("look up %s: %w", req.BaseURL, err)
	}
	// The request is ingested (again): its downloads claim their files under the generation of
	// the row it found, so that requests for the same dataset in flight at once — which found
	// the same row, or none — download each file once, while a later request, which finds the
	// row they wrote, downloads anew.
	ingest := func() error {
		gen := "0"
		if row != nil {
			gen = strconv.FormatInt(row.Updated.UnixNano(), 10)
		}
		out.SetMetadata(map[string]any{mdGeneration: gen})
		out.Emit(EventNew)
		return nil
	}
	if req.ForceRecrawl || row == nil || !row.Result.Hit {
		return ingest()
	}
	web := strings.HasPrefix(row.Result.IngestStrategy, "web-")
	archived := row.Result.Manifest
	if b := row.Result.FilesetBundle; b != nil && b.Terminal != nil {
		// A bundle's files are archived as the bundle is.
		archived = []ManifestFile{{TerminalURL: b.Terminal.URL, SHA1: b.FileMeta.SHA1, SHA256: b.FileMeta.SHA256}}
	}
	for _, f := range archived {
		if web {
			// Stored in "wayback": the CDX index has the file's capture (its URL and payload
			// sha1), whose WARC is in the blob store — else it is captured again.
			c, err := engine.Query[*CDX](ctx, DomainName, readCDX, cdxKey{URL: f.TerminalURL, SHA1Hex: f.SHA1})
			if err != nil {
				return fmt.Errorf("look up the capture of %s: %w", f.TerminalURL, err)
			}
			if c == nil {
				return ingest()
			}
			if _, err := reads.Blobs().Stat(ctx, c.WarcPath); err != nil {
				return ingest()
			}
			continue
		}
		if f.SHA256 == "" {
			continue
		}
		if _, err := reads.Blobs().Stat(ctx, f.SHA256); err != nil {
			// A file of the earlier result is gone from the blob store: ingest again.
			return ingest()
		}
	}
	out.SetMetadata(map[string]any{mdExisting: asMap(row.Result)})
	conclude(out, StatusSuccessExisting, "")
	return nil
}

type landingAction struct{ s *Fileset }

func (a landingAction) Spec() action.Spec {
	return action.Spec{Name: "fileset-landing", Doc: "fetch a dataset request's landing page, following redirects",
		Outcomes: []string{EventLanding}, Concurrency: 16}
}

// Policy runs the action without a temporary directory.
func (a landingAction) Policy() action.Policy { return action.Policy{NoTempDir: true} }

func (a landingAction) Run(ctx context.Context, t *action.Task, out action.Output) error {
	req := request(t.Item)
	resp, terminal, err := a.s.fetch.get(ctx, req.BaseURL, nil)
	if err != nil {
		if _, _, ok := asStatus(err); ok || ctx.Err() != nil {
			return concludeErr(out, err)
		}
		conclude(out, StatusNoCapture, fmt.Sprintf("fetch %s: %v", req.BaseURL, err))
		return nil
	}
	now := a.s.cfg.Now()
	term := Terminal{URL: terminal, StatusCode: resp.StatusCode, DT: now.UTC().Format("20060102150405")}
	if resp.StatusCode >= 400 {
		drain(resp)
		out.SetMetadata(map[string]any{mdTerminal: asMap(term)})
		conclude(out, StatusTerminalBadStatus, fmt.Sprintf("%s: status %d", terminal, resp.StatusCode))
		return nil
	}
	// The page is captured as the web archive would: a WARC blob and its CDX line.
	capture, body, err := a.s.captureLanding(ctx, t, out, resp, terminal, now)
	resp.Body.Close()
	if err != nil {
		out.SetMetadata(map[string]any{mdTerminal: asMap(term)})
		return concludeErr(out, err)
	}
	defer os.Remove(body)
	term.SHA1 = capture.FileMeta.SHA1
	out.SetMetadata(map[string]any{mdTerminal: asMap(term), mdLanding: asMap(capture)})
	if resp.StatusCode < 300 && htmlish(capture.FileMeta.Mimetype) {
		f, err := os.Open(body)
		if err != nil {
			return err
		}
		b := extractBiblio(f)
		f.Close()
		if b != nil {
			out.SetMetadata(map[string]any{mdBiblio: asMap(b)})
		}
	}
	out.Emit(EventLanding)
	return nil
}

type platformAction struct{ s *Fileset }

func (a platformAction) Spec() action.Spec {
	names := strings.Join(PlatformNames, ", ")
	typed := platformSettings.WithDoc("platform", "one of "+names+"; none: each in turn, in that order")
	return action.Spec{Name: "fileset-platform", Doc: "match a request's URL to a platform (" + names + ")",
		Settings: typed.Settings(),
		Outcomes: []string{EventMatched},
		OutcomesFor: func(with map[string]any) []string {
			if c, err := typed.Parse(with); err == nil && c.Miss != "" {
				return []string{c.Miss}
			}
			return nil
		},
		Validate:    typed.Validate,
		Concurrency: 16}
}

// platformSettings are a platform step's: the platform to try (none: each in turn) and the
// event its miss fires.
var platformSettings = settings.For(nil, func(c *platformConfig) error {
	if _, ok := kindOf(c.Platform); !ok && c.Platform != "" {
		return &action.SettingError{Key: "platform", Reason: fmt.Sprintf("unknown platform %q (one of %v)", c.Platform, PlatformNames)}
	}
	return nil
})

type platformConfig struct {
	Platform string `with:"platform" doc:"a platform's name; none: each in turn"`
	Miss     string `with:"miss" doc:"the event fired when the URL is not the platform's; none: no-platform-match"`
}

// Policy runs the action inline: a match is decided from the item's URLs alone (the manifest
// step does the reading), so the engine runs every platform step in the transaction that
// readies it.
func (a platformAction) Policy() action.Policy {
	return action.Policy{NoTempDir: true, Inline: action.InlineAlways}
}

// platformMatch is what a platform step that matched records for the manifest step, and for
// the result of a request its platform ends early (a 404, restricted, out of scope): the
// platform's name and what the URL alone says of the dataset.
type platformMatch struct {
	Platform string `json:"platform"`
	URL      string `json:"url"`
	platformIdent
}

func (a platformAction) Run(ctx context.Context, t *action.Task, out action.Output) error {
	c, err := platformSettings.Run(t.With)
	if err != nil {
		return err
	}
	name, miss := c.Platform, c.Miss
	names := PlatformNames
	if name != "" {
		names = []string{name}
	}
	req := request(t.Item)
	var term Terminal
	decodeMD(t.Item.Metadata, mdTerminal, &term)
	for _, name := range names {
		p, ok := a.s.cfg.Platforms.platform(name)
		if !ok {
			return action.Permanentf("unknown platform %q", name)
		}
		for _, raw := range []string{term.URL, req.BaseURL} {
			c, err := url.Parse(raw)
			if err != nil || raw == "" {
				continue
			}
			if id, ok := p.match(c); ok {
				out.SetMetadata(map[string]any{mdMatch: asMap(platformMatch{Platform: name, URL: raw, platformIdent: id})})
				out.Emit(EventMatched)
				return nil
			}
		}
	}
	if miss != "" {
		out.Emit(miss)
	} else {
		conclude(out, StatusNoPlatformMatch, "no platform matches "+req.BaseURL)
	}
	return nil
}

type manifestAction struct{ s *Fileset }

func (a manifestAction) Spec() action.Spec {
	return action.Spec{Name: "fileset-manifest", Doc: "read the dataset's manifest from the platform a platform step matched",
		Outcomes: []string{EventPlatform}, Concurrency: 16}
}

// Policy runs the action without a temporary directory.
func (a manifestAction) Policy() action.Policy { return action.Policy{NoTempDir: true} }

func (a manifestAction) Run(ctx context.Context, t *action.Task, out action.Output) error {
	var m platformMatch
	if !decodeMD(t.Item.Metadata, mdMatch, &m) {
		return action.Permanentf("item %d has no %s metadata", t.Item.ID, mdMatch)
	}
	p, ok := a.s.cfg.Platforms.platform(m.Platform)
	if !ok {
		return action.Permanentf("unknown platform %q", m.Platform)
	}
	u, err := url.Parse(m.URL)
	if err != nil {
		return action.Permanentf("matched URL %q: %v", m.URL, err)
	}
	item, err := p.process(ctx, a.s.fetch, u)
	if err != nil {
		if _, _, ok := asStatus(err); !ok && ctx.Err() == nil {
			err = failWith(StatusPlatformError, "%s: %v", m.Platform, err)
		}
		return concludeErr(out, err)
	}
	if _, _, _, err := manifestSizes(item.Manifest); err != nil {
		return concludeErr(out, err)
	}
	a.s.cfg.Limits.truncate(item)
	out.SetMetadata(map[string]any{mdPlatform: asMap(item)})
	out.Emit(EventPlatform)
	return nil
}

type limitsAction struct{ s *Fileset }

func (a limitsAction) Spec() action.Spec {
	var outcomes []string
	for _, st := range Strategies {
		outcomes = append(outcomes, StrategyEvent(st))
	}
	return action.Spec{Name: "fileset-limits", Doc: "check a manifest against the limits and choose its strategy",
		Settings: limitSettings.Settings(), Validate: limitSettings.Validate,
		Outcomes: outcomes, Concurrency: 16}
}

// limitSettings are a limits step's: each overrides the process's limit when positive.
var limitSettings = settings.For[struct {
	MaxTotalSize int64 `with:"max_total_size" doc:"bytes; default 64 GiB"`
	MaxFileCount int   `with:"max_file_count" doc:"default 200"`
}](nil, nil)

// Policy runs the action inline: it reads only the item.
func (a limitsAction) Policy() action.Policy {
	return action.Policy{NoTempDir: true, Inline: action.InlineAlways}
}

// intMetadata reads an integer the engine or a JSON decoder put in an item's metadata.
func intMetadata(md map[string]any, key string) int64 {
	switch v := md[key].(type) {
	case float64:
		return int64(v)
	case int:
		return int64(v)
	case int64:
		return v
	case json.Number:
		n, _ := v.Int64()
		return n
	}
	return 0
}

func (a limitsAction) Run(ctx context.Context, t *action.Task, out action.Output) error {
	var item PlatformItem
	if !decodeMD(t.Item.Metadata, mdPlatform, &item) {
		return action.Permanentf("item %d has no %s metadata", t.Item.ID, mdPlatform)
	}
	c, err := limitSettings.Run(t.With)
	if err != nil {
		return err
	}
	l := a.s.cfg.Limits
	if c.MaxTotalSize > 0 {
		l.MaxTotalSize = c.MaxTotalSize
	}
	if c.MaxFileCount > 0 {
		l.MaxFileCount = c.MaxFileCount
	}
	if st, msg := l.check(&item); st != "" {
		conclude(out, st, msg)
		return nil
	}
	st := l.Strategy(&item)
	// Declared sizes bound their files' downloads (a longer body is a mismatch); the files
	// without one share what the declared sizes leave of the limit. A bundle has no declared
	// size: its files' sizes bound it.
	budget := unsizedBudget(item.Manifest, l.MaxTotalSize)
	if bundled(st) {
		budget = bundleBudget(item.Manifest, l.MaxTotalSize)
	}
	out.SetMetadata(map[string]any{mdStrategy: st, mdUnsized: budget})
	out.Emit(StrategyEvent(st))
	return nil
}

type strategyAction struct{ s *Fileset }

func (a strategyAction) Spec() action.Spec {
	return action.Spec{Name: "fileset-strategy", Doc: "make a child item per manifest file, each downloaded by a task of its own",
		Settings: strategySettings.Settings(), Validate: strategySettings.Validate,
		Concurrency: 8}
}

// strategySettings are a strategy step's: the strategy it applies.
var strategySettings = settings.For(nil, func(c *struct {
	Strategy string `with:"strategy" required:"true" doc:"web-file, web-fileset, archiveorg-file or archiveorg-fileset"`
}) error {
	if !slices.Contains(Strategies, c.Strategy) {
		return &action.SettingError{Key: "strategy", Reason: fmt.Sprintf("unknown strategy %q (one of %v)", c.Strategy, Strategies)}
	}
	return nil
})

// Policy runs the action without a temporary directory.
func (a strategyAction) Policy() action.Policy { return action.Policy{NoTempDir: true} }

func (a strategyAction) Run(ctx context.Context, t *action.Task, out action.Output) error {
	var item PlatformItem
	if !decodeMD(t.Item.Metadata, mdPlatform, &item) {
		return action.Permanentf("item %d has no %s metadata", t.Item.ID, mdPlatform)
	}
	for _, f := range item.Manifest {
		if !SafePath(f.Path) {
			conclude(out, StatusUnsafePath, fmt.Sprintf("manifest path %q is absolute, has a .. segment, a backslash or a NUL", f.Path))
			return nil
		}
		if u, err := url.Parse(f.PlatformURL); f.PlatformURL == "" || err != nil || u.Host == "" {
			conclude(out, StatusPlatformError, fmt.Sprintf("manifest file %q has no usable download URL", f.Path))
			return nil
		}
	}
	out.SetMetadata(map[string]any{mdFilesStep: t.Step})
	files := item.Manifest
	if st, _ := t.Item.Metadata[mdStrategy].(string); bundled(st) {
		// One download: the platform's archive of every file.
		files = []ManifestFile{bundleFile(&item)}
	}
	for i := action.Resume(out); i < len(files); i++ {
		f := files[i]
		u, _ := url.Parse(f.PlatformURL)
		err := out.CreateChild(ctx, action.Child{Name: f.Path, ContentType: f.Mimetype, Metadata: map[string]any{
			mdRole: "file", mdFile: asMap(f), mdHost: u.Host, mdClaim: claimKey(t.Item, f), mdBundle: len(files) != len(item.Manifest),
			// The parent's bulky findings stay with the parent; mdUnsized is the child's too.
			mdRequest: nil, mdPlatform: nil, mdTerminal: nil, mdLanding: nil, mdBiblio: nil, mdExisting: nil, mdFilesStep: nil, mdGeneration: nil, mdMatch: nil,
		}})
		if err != nil {
			return err
		}
	}
	return nil
}

// bundleFile is the manifest entry of a dataset's bundle: its download-all archive, of no
// declared size or digest (its interior files are verified against the manifest instead).
func bundleFile(item *PlatformItem) ManifestFile {
	return ManifestFile{Path: item.PlatformName + "-" + safeName(item.PlatformID) + ".zip", Mimetype: "application/zip",
		PlatformURL: item.WebBundleURL}
}

// safeName keeps the letters, digits, '.', '-' and '_' of s (an id in a file name).
func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, s)
}

// claimKey is the key a file's download claims (the workflow's download step: claim, scope
// installation): the request, the generation of the row its check-existing found, and the
// file with what its manifest expects. Requests for one dataset in flight at once share it,
// so the first downloads each file and the others take its outcome; a request made after
// they wrote their result has a generation of its own.
func claimKey(parent action.Item, f ManifestFile) string {
	req := request(parent)
	gen, _ := parent.Metadata[mdGeneration].(string)
	size := ""
	if f.Size != nil {
		size = strconv.FormatInt(*f.Size, 10)
	}
	h := sha256.New()
	for _, p := range []string{req.IngestType, req.BaseURL, gen, f.Path, f.PlatformURL, size, f.MD5, f.SHA1, f.SHA256} {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

type downloadAction struct{ s *Fileset }

func (a downloadAction) Spec() action.Spec {
	return action.Spec{Name: "fileset-download", Doc: "download one manifest file, verify its size and hashes, store it as a child's blob",
		Settings: downloadSettings.Settings(), Validate: downloadSettings.Validate,
		Concurrency: 16, Timeout: 6 * 3600e9}
}

// downloadSettings are the download step's: the politeness delay, which the workflow's
// per-host limit: rate carries too ([WorkflowSource]).
var downloadSettings = settings.For[struct {
	HostDelay time.Duration `with:"host_delay" doc:"the least time between a response's head from a host and this process's next download request to it; none: no delay"`
}](nil, nil)

// Policy runs the action without a temporary directory.
func (a downloadAction) Policy() action.Policy { return action.Policy{NoTempDir: true} }

// fileOutcome is what a download task records on its file item.
type fileOutcome struct {
	Status      string `json:"status"`
	Error       string `json:"error,omitempty"`
	TerminalURL string `json:"terminal_url,omitempty"`
	TerminalDT  string `json:"terminal_dt,omitempty"`
	// CDX is the capture's line, for a web-* strategy.
	CDX *CDX `json:"cdx,omitempty"`
	// Interior lists a bundle's files, with their sizes and digests.
	Interior []ManifestFile `json:"interior,omitempty"`
	FileMeta
}

func (a downloadAction) Run(ctx context.Context, t *action.Task, out action.Output) error {
	var mf ManifestFile
	if !decodeMD(t.Item.Metadata, mdFile, &mf) {
		return action.Permanentf("item %d has no %s metadata", t.Item.ID, mdFile)
	}
	if err := os.MkdirAll(a.s.cfg.PartialDir, 0o755); err != nil {
		return err
	}
	partial := a.s.partialPath(t.JobID, t.Item.ID)
	if action.Resume(out) > 0 {
		// An earlier attempt stored the verified file and died before it completed.
		return a.recordStored(ctx, t, out, partial)
	}
	limit := a.s.cfg.MaxFileSize
	if n := intMetadata(t.Item.Metadata, mdUnsized); t.Item.Metadata[mdUnsized] != nil {
		limit = min(limit, n)
	}
	c, err := downloadSettings.Run(t.With)
	if err != nil {
		return err
	}
	got, err := a.s.download(ctx, mf, limit, partial, c.HostDelay, out.Heartbeat)
	if err != nil {
		if st, msg, ok := asStatus(err); ok {
			removePartial(partial)
			out.SetMetadata(map[string]any{mdFileResult: asMap(fileOutcome{Status: st, Error: capError(msg)})})
			return nil
		}
		return err
	}
	now := a.s.cfg.Now()
	oc := fileOutcome{Status: StatusSuccess, TerminalURL: got.terminalURL, TerminalDT: now.UTC().Format("20060102150405"), FileMeta: got.meta}
	if b, _ := t.Item.Metadata[mdBundle].(bool); b {
		// The dataset's bundle: its interior files are listed (and verified by the result step).
		if oc.Interior, err = listBundle(partial, a.s.cfg.Limits.MaxManifest, a.s.cfg.Limits.MaxTotalSize); err != nil {
			st, msg, _ := asStatus(err)
			removePartial(partial)
			out.SetMetadata(map[string]any{mdFileResult: asMap(fileOutcome{Status: st, Error: capError(msg)})})
			return nil
		}
	}
	if webStrategy(t.Item) {
		// Stored in "wayback": the capture's WARC is a child of its own, made first; its CDX
		// line is written with the task.
		cdx, err := a.storeWARC(ctx, t, out, partial, now, oc, got.head)
		if err != nil {
			return err
		}
		oc.CDX = cdx
	}
	return a.storeFile(ctx, t, out, partial, oc)
}

// webStrategy reports whether a file item's request chose a web-* strategy (its metadata
// inherits the request's).
func webStrategy(it action.Item) bool {
	st, _ := it.Metadata[mdStrategy].(string)
	return strings.HasPrefix(st, "web-")
}

// storeWARC writes the capture of the verified file at partial as a WARC (a warcinfo and a
// response record) into the blob store, a child of the file item, and returns its CDX line.
func (a downloadAction) storeWARC(ctx context.Context, t *action.Task, out action.Output, partial string, at time.Time, oc fileOutcome, head []byte) (*CDX, error) {
	tmp := partial + ".warc.gz"
	defer os.Remove(tmp)
	cdx, err := captureFile(partial, tmp, a.s.cfg.PartialDir, oc.TerminalURL, at, oc.FileMeta, head)
	if err != nil {
		return nil, err
	}
	oc.CDX = &cdx
	f, err := os.Open(tmp)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	err = out.CreateChild(ctx, action.Child{Name: t.Item.Name + ".warc.gz", ContentType: "application/warc", Blob: f,
		Metadata: map[string]any{mdRole: "warc", mdFile: nil, mdFileResult: asMap(oc)}})
	return &cdx, err
}

// storeFile stores the verified file at partial as the file item's blob child, and records its
// outcome (and its capture's CDX line) with the task.
func (a downloadAction) storeFile(ctx context.Context, t *action.Task, out action.Output, partial string, oc fileOutcome) error {
	f, err := os.Open(partial)
	if err != nil {
		return err
	}
	err = out.CreateChild(ctx, action.Child{Name: t.Item.Name, ContentType: oc.Mimetype, Blob: f,
		Metadata: map[string]any{mdRole: "blob", mdFile: nil, mdFileResult: asMap(oc)}})
	f.Close()
	if err != nil {
		return err
	}
	// The partial file stays until the child is committed — CreateChild records it after it
	// returns, and a process killed before then must find the verified bytes again, not fetch
	// them from scratch: the result step, or a later attempt (recordStored), removes it.
	return a.record(out, oc)
}

// record records a file's outcome, and its capture's CDX line, with the task.
func (a downloadAction) record(out action.Output, oc fileOutcome) error {
	if oc.CDX != nil {
		if err := out.Write(action.DomainWrite{Domain: DomainName, Key: "cdx " + oc.CDX.URL + " " + oc.CDX.Datetime,
			Payload: resultWrite{CDX: oc.CDX}}); err != nil {
			return err
		}
	}
	out.SetMetadata(map[string]any{mdFileResult: asMap(oc)})
	return nil
}

// removePartial removes a download's partial file and the head of the response it came from.
func removePartial(partial string) {
	_ = os.Remove(partial)
	_ = os.Remove(headPath(partial))
}

// headPath is where the download whose partial file is at partial keeps the HTTP head of the
// response its bytes came from (their first byte's: a resumed transfer continues that response).
func headPath(partial string) string { return partial + ".http" }

// partialPath is where the download of a file item keeps its bytes until they are a blob.
func (s *Fileset) partialPath(jobID, itemID int64) string {
	return filepath.Join(s.cfg.PartialDir, "j"+strconv.FormatInt(jobID, 10)+"-i"+strconv.FormatInt(itemID, 10)+".partial")
}

// recordStored records the outcome an earlier attempt stored with the file's children (its
// capture's WARC, first, for a web-* strategy, then its blob), storing the blob from the
// verified partial file if that attempt died in between.
func (a downloadAction) recordStored(ctx context.Context, t *action.Task, out action.Output, partial string) error {
	reads, err := engine.ReadsOf(ctx)
	if err != nil {
		return err
	}
	kids, err := reads.StepChildren(ctx, t.Item.ID, t.Step)
	if err != nil {
		return err
	}
	if len(kids) == 0 {
		return fmt.Errorf("item %d: its stored file is not listed", t.Item.ID)
	}
	var md map[string]any
	if err := metadata.Unmarshal(kids[0].Metadata, &md); err != nil {
		return err
	}
	var oc fileOutcome
	if !decodeMD(md, mdFileResult, &oc) {
		return action.Permanentf("item %d: its stored file has no %s", kids[0].ID, mdFileResult)
	}
	if role, _ := md[mdRole].(string); role == "warc" && len(kids) == 1 {
		if _, err := os.Stat(partial); err != nil {
			return action.Permanentf("item %d: its verified file, captured in %s, is gone from %s: %v", t.Item.ID, kids[0].Name, partial, err)
		}
		return a.storeFile(ctx, t, out, partial, oc)
	}
	removePartial(partial)
	return a.record(out, oc)
}
