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

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/settings"
	"github.com/sluice-project/sluice/internal/engine"
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
	mdPlatform   = "fileset_platform"
	mdMatch      = "fileset_match" // the platform that matched, and the URL it matched
	mdStrategy   = "fileset_strategy"
	mdRole       = "fileset_role"
	mdFile       = "fileset_file"
	mdFileResult = "fileset_file_result"
	mdFilesStep  = "fileset_files_step" // the step that made the file items
	mdHost       = "host"
	mdGeneration = "fileset_generation"     // of the fileset_results row check-existing found
	mdClaim      = "fileset_claim"          // a file's download claim (claimKey)
	mdUnsized    = "fileset_unsized_budget" // bytes each file without a declared size may download
)

// The output kinds of the result step.
const (
	KindResult     = "fileset_result"
	KindFileResult = "dataset_file_result"
)

// StrategyEvent is the event the limits step fires for a strategy.
func StrategyEvent(strategy string) string { return "strategy." + strategy }

// Strategies lists the strategies that have a step.
var Strategies = []string{StrategyWebFile, StrategyWebFileset, StrategyArchiveorgFile, StrategyArchiveorgFileset}

func decodeMD(md map[string]any, key string, into any) bool {
	v, ok := md[key]
	if !ok || v == nil {
		return false
	}
	b, err := json.Marshal(v)
	if err != nil {
		return false
	}
	return json.Unmarshal(b, into) == nil
}

// asMap turns a value into JSON-shaped metadata.
func asMap(v any) any {
	b, _ := json.Marshal(v)
	var m any
	_ = json.Unmarshal(b, &m)
	return m
}

func request(it action.Item) Request {
	var r Request
	decodeMD(it.Metadata, mdRequest, &r)
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
	return action.Spec{Name: "fileset-existing", Doc: "a request already archived is success-existing (fileset_results, its blobs present)",
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
	for _, f := range row.Result.Manifest {
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
	drain(resp)
	term := Terminal{URL: terminal, StatusCode: resp.StatusCode, DT: a.s.cfg.Now().UTC().Format("20060102150405")}
	out.SetMetadata(map[string]any{mdTerminal: asMap(term)})
	if resp.StatusCode >= 400 {
		conclude(out, StatusTerminalBadStatus, fmt.Sprintf("%s: status %d", terminal, resp.StatusCode))
		return nil
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

// platformMatch is what a platform step that matched records for the manifest step.
type platformMatch struct {
	Platform string `json:"platform"`
	URL      string `json:"url"`
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
			if c, err := url.Parse(raw); err == nil && raw != "" && p.match(c) {
				out.SetMetadata(map[string]any{mdMatch: asMap(platformMatch{Platform: name, URL: raw})})
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
	st := ChooseStrategy(&item)
	// Declared sizes bound their files' downloads (a longer body is a mismatch); the files
	// without one share what the declared sizes leave of the limit.
	out.SetMetadata(map[string]any{mdStrategy: st, mdUnsized: unsizedBudget(item.Manifest, l.MaxTotalSize)})
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
	for i := action.Resume(out); i < len(item.Manifest); i++ {
		f := item.Manifest[i]
		u, _ := url.Parse(f.PlatformURL)
		err := out.CreateChild(ctx, action.Child{Name: f.Path, ContentType: f.Mimetype, Metadata: map[string]any{
			mdRole: "file", mdFile: asMap(f), mdHost: u.Host, mdClaim: claimKey(t.Item, f),
			// The parent's bulky findings stay with the parent; mdUnsized is the child's too.
			mdRequest: nil, mdPlatform: nil, mdTerminal: nil, mdExisting: nil, mdFilesStep: nil, mdGeneration: nil, mdMatch: nil,
		}})
		if err != nil {
			return err
		}
	}
	return nil
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
		Concurrency: 16, Timeout: 6 * 3600e9}
}

// Policy runs the action without a temporary directory.
func (a downloadAction) Policy() action.Policy { return action.Policy{NoTempDir: true} }

// fileOutcome is what a download task records on its file item.
type fileOutcome struct {
	Status      string `json:"status"`
	Error       string `json:"error,omitempty"`
	TerminalURL string `json:"terminal_url,omitempty"`
	TerminalDT  string `json:"terminal_dt,omitempty"`
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
	got, err := a.s.download(ctx, mf, limit, partial, out.Heartbeat)
	if err != nil {
		if st, msg, ok := asStatus(err); ok {
			_ = os.Remove(partial)
			out.SetMetadata(map[string]any{mdFileResult: asMap(fileOutcome{Status: st, Error: capError(msg)})})
			return nil
		}
		return err
	}
	oc := fileOutcome{Status: StatusSuccess, TerminalURL: got.terminalURL, TerminalDT: a.s.cfg.Now().UTC().Format("20060102150405"), FileMeta: got.meta}
	f, err := os.Open(partial)
	if err != nil {
		return err
	}
	err = out.CreateChild(ctx, action.Child{Name: t.Item.Name, ContentType: got.meta.Mimetype, Blob: f,
		Metadata: map[string]any{mdRole: "blob", mdFile: nil, mdFileResult: asMap(oc)}})
	f.Close()
	if err != nil {
		return err
	}
	// The partial file stays until the child is committed — CreateChild records it after it
	// returns, and a process killed before then must find the verified bytes again, not fetch
	// them from scratch: the result step, or a later attempt (recordStored), removes it.
	out.SetMetadata(map[string]any{mdFileResult: asMap(oc)})
	return nil
}

// partialPath is where the download of a file item keeps its bytes until they are a blob.
func (s *Fileset) partialPath(jobID, itemID int64) string {
	return filepath.Join(s.cfg.PartialDir, "j"+strconv.FormatInt(jobID, 10)+"-i"+strconv.FormatInt(itemID, 10)+".partial")
}

// recordStored records the outcome an earlier attempt stored with the file's blob child.
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
	if err := json.Unmarshal(kids[0].Metadata, &md); err != nil {
		return err
	}
	var oc fileOutcome
	if !decodeMD(md, mdFileResult, &oc) {
		return action.Permanentf("item %d: its stored file has no %s", kids[0].ID, mdFileResult)
	}
	_ = os.Remove(partial)
	out.SetMetadata(map[string]any{mdFileResult: asMap(oc)})
	return nil
}
