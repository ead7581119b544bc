package objects

import (
	"context"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/settings"
	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/pronom"
	"github.com/sluice-project/sluice/internal/record"
)

// ChainAction names one action of a file set's chain twice: as Sluice's catalog knows it and
// as Meadow's action_states record it.
type ChainAction struct {
	Action string // objects.digests
	State  string // GenerateFileSetDigests
}

// Chain is every action a file set's chain may hold, in Meadow's order. Which of them run for
// a file set is not decided here but by the objects workflow's `when:` conditions (Meadow's
// role × MIME type table, or the file set's custom_actions); this order is only the one
// [Service] records them in.
var Chain = []ChainAction{
	{"objects.ingest-file-set", "IngestFileSet"},
	{"objects.extract-mime-type", "ExtractMimeType"},
	{"objects.initialize-dispatch", "InitializeDispatch"},
	{"objects.digests", "GenerateFileSetDigests"},
	{"objects.exif", "ExtractExifMetadata"},
	{"objects.copy-to-preservation", "CopyFileToPreservation"},
	{"objects.attach-transcription", "AttachTranscription"},
	{"objects.derivative-copy", "CreateDerivativeCopy"},
	{"objects.pyramid-tiff", "CreatePyramidTiff"},
	{"objects.generate-ai-metadata", "GenerateAIMetadata"},
	{"objects.media-metadata", "ExtractMediaMetadata"},
	{"objects.create-transcode-job", "CreateTranscodeJob"},
	{"objects.transcode-complete", "TranscodeComplete"},
	{"objects.file-set-complete", "FileSetComplete"},
}

// initialActions are the actions every file set starts with, waiting, before its chain is known.
var initialActions = []string{"IngestFileSet", "ExtractMimeType", "InitializeDispatch"}

func stateOf(actionName string) string {
	for _, c := range Chain {
		if c.Action == actionName {
			return c.State
		}
	}
	return ""
}

// call is one run of a chain action on a file set.
type call struct {
	s     *Service
	db    *taskDB // the task's read port
	blobs blob.Store
	t     *action.Task
	out   action.Output
	id    string // the file set's id
	state string // the action's name in action_states
	notes string // set by the work, recorded with ok
}

func (c *call) md(k string) string { return str(c.t.Item.Metadata, k) }

// fileSet reads the file set's row.
func (c *call) fileSet(ctx context.Context) (*FileSet, error) {
	f, err := c.db.FileSet(ctx, c.id)
	if errors.Is(err, ErrNotFound) {
		return nil, action.Permanentf("file set %s is missing", c.id)
	}
	return f, err
}

func (c *call) core(k string, v any) error {
	return writeOp(c.out, "core."+k, write{Op: opCore, FileSetID: c.id, Core: map[string]any{k: v}})
}

func (c *call) derivative(kind string, v any) error {
	return writeOp(c.out, "derivative."+kind, write{Op: opDerivative, FileSetID: c.id, Kind: kind, Value: v})
}

// blob records that the file set references a blob, which keeps it from the blob collector.
func (c *call) blob(kind, sum string) error {
	return writeOp(c.out, "blob."+kind, write{Op: opBlob, FileSetID: c.id, Kind: kind, Value: sum})
}

func (c *call) setState(act, outcome, notes string) error {
	return writeOp(c.out, "state."+act, write{Op: opState,
		Action: ActionState{ObjectID: c.id, ObjectType: "FileSet", Action: act, Outcome: outcome, Notes: notes}})
}

// chainStep is the behaviour of one chain action: when its work is already done (Meadow's
// already_complete?, nil for never) and the work.
type chainStep struct {
	ChainAction
	doc         string
	concurrency int
	tempDir     bool
	timeout     time.Duration
	done        func(ctx context.Context, c *call) (bool, error)
	work        func(ctx context.Context, c *call) error
	// settings are the step's own, beside force and overwrite (nil: only those).
	settings []action.Setting
	validate func(with map[string]any) error
	// skip, when set, returns why the action has nothing to do for the task ("" when it has
	// work): it is then ok with that note, never started.
	skip func(c *call) string
}

func (s *Service) chainActions() []action.Action {
	steps := s.chainSteps()
	out := make([]action.Action, 0, len(steps)+1)
	for _, st := range steps {
		spec := action.Spec{Name: st.Action, Doc: st.doc, Concurrency: st.concurrency, Timeout: st.timeout,
			Settings: chainSettings.Settings(), Validate: chainSettings.Validate}
		if st.settings != nil {
			spec.Settings, spec.Validate = st.settings, st.validate
		}
		out = append(out, &act{spec, action.Policy{NoTempDir: !st.tempDir}, s.runChain(st)})
	}
	return append(out, &act{action.Spec{Name: "objects.file-set-failed",
		Doc: "Record a file set's failure: its failed action's state error with the item's error, the waiting ones error."},
		action.Policy{NoTempDir: true}, s.fileSetFailed})
}

// chainSettings are a chain step's: whether it runs again over a result it has.
var chainSettings = settings.For[chainConfig](nil, nil)

type chainConfig struct {
	Force     *bool `with:"force" doc:"run even when the action's state is already ok or n/a"`
	Overwrite *bool `with:"overwrite" doc:"false: mark ok without work when the result already exists"`
}

// flag reads a boolean from the step's settings, else the item's metadata (a sheet's options
// reach its file sets there: true, false or the strings "true" and "false"), else def.
func flag(t *action.Task, k string, def bool) bool {
	with := map[string]any{}
	for _, key := range []string{"force", "overwrite"} {
		if v, ok := t.With[key]; ok {
			with[key] = v
		}
	}
	if c, err := chainSettings.Parse(with); err == nil {
		if v := map[string]*bool{"force": c.Force, "overwrite": c.Overwrite}[k]; v != nil {
			return *v
		}
	}
	switch v := t.Item.Metadata[k].(type) {
	case bool:
		return v
	case string:
		return v == "true" || v != "false" && def
	}
	return def
}

// runChain wraps a chain action's work in Meadow's idempotent delivery: a file set whose state
// for the action is already ok or n/a is left alone unless forced; with overwrite false, a
// result that already exists marks the action ok without work; otherwise the action is
// started, works, and is ok — the ok (and the work's writes) committed with the task.
// fileSetWait bounds how long a file set's chain waits for its file set's row.
const fileSetWait = 2 * time.Minute

// awaitFileSet snoozes the chain's task while its file set's row is not yet recorded. A work's
// file set items are committed in groups while its create-file-sets action runs, before the
// action's result records the file sets' rows, so a chain may start in between: its writes would
// update a row not there yet (the file set's item id was lost that way, one run in four of
// TestTranscoderEventForms). Past fileSetWait the row will not come (the work's action failed
// after committing its items) and the task fails saying so.
func (s *Service) awaitFileSet(ctx context.Context, c *call) error {
	_, err := c.db.FileSet(ctx, c.id)
	if !errors.Is(err, ErrNotFound) {
		if err == nil {
			s.unrecorded.Delete(c.t.Item.ID)
		}
		return err
	}
	first, _ := s.unrecorded.LoadOrStore(c.t.Item.ID, time.Now())
	if time.Since(first.(time.Time)) > fileSetWait {
		s.unrecorded.Delete(c.t.Item.ID)
		return action.Permanentf("file set %s was never recorded: its work's create-file-sets step did not commit it", c.id)
	}
	return action.Snooze(100 * time.Millisecond)
}

func (s *Service) runChain(st chainStep) func(ctx context.Context, t *action.Task, out action.Output) error {
	return func(ctx context.Context, t *action.Task, out action.Output) error {
		db, err := portOf(ctx)
		if err != nil {
			return err
		}
		c := &call{s: s, db: db, blobs: db.blobs(), t: t, out: out, id: str(t.Item.Metadata, "file_set_id"), state: st.State}
		if c.id == "" {
			return action.Permanentf("item %d is not a file set (no file_set_id)", t.Item.ID)
		}
		if err := s.awaitFileSet(ctx, c); err != nil {
			return err
		}
		cur, err := c.db.ActionOutcome(ctx, c.id, st.State)
		if err != nil {
			return err
		}
		if (cur == OutcomeOK || cur == OutcomeNA) && !flag(t, "force", false) {
			return nil
		}
		if st.skip != nil {
			if note := st.skip(c); note != "" {
				return c.setState(st.State, OutcomeOK, note)
			}
		}
		if !flag(t, "overwrite", true) && st.done != nil {
			done, err := st.done(ctx, c)
			if err != nil {
				return err
			}
			if done {
				return c.setState(st.State, OutcomeOK, "already complete")
			}
		}
		// started is recorded as the work begins, outside the task's transaction: an attempt
		// that dies leaves it, and the next writes it again to no effect.
		if err := c.db.PutStarted(ctx, ActionState{ObjectID: c.id, ObjectType: "FileSet", Action: st.State, Outcome: OutcomeStarted}, now()); err != nil {
			return fmt.Errorf("record %s started: %w", st.State, err)
		}
		if err := st.work(ctx, c); err != nil {
			return err
		}
		return c.setState(st.State, OutcomeOK, c.notes)
	}
}

// hasCore reports whether the file set's core metadata holds key.
func hasCore(key string) func(ctx context.Context, c *call) (bool, error) {
	return func(ctx context.Context, c *call) (bool, error) {
		f, err := c.fileSet(ctx)
		if err != nil {
			return false, err
		}
		return f.Core[key] != nil, nil
	}
}

// hasDerivative reports whether the file set has a derivative of the kind.
func hasDerivative(kind string) func(ctx context.Context, c *call) (bool, error) {
	return func(ctx context.Context, c *call) (bool, error) {
		return c.db.HasDerivative(ctx, c.id, kind)
	}
}

func (s *Service) chainSteps() []chainStep {
	return []chainStep{
		{ChainAction: Chain[0], doc: "Start a file set's chain (Meadow's IngestFileSet).", concurrency: 8,
			work: func(ctx context.Context, c *call) error {
				return writeOp(c.out, "item", write{Op: opCore, FileSetID: c.id, ItemID: c.t.Item.ID, Core: map[string]any{}})
			}},
		{ChainAction: Chain[1], doc: "Record the file's MIME type, from its content (else its extension).", concurrency: 8,
			done: hasCore("mime_type"),
			work: func(ctx context.Context, c *call) error {
				p := c.md("location")
				rc, err := c.open(ctx, p, 64)
				if err != nil {
					return err
				}
				defer rc.Close()
				m, err := detectMIME(rc, p)
				if err != nil {
					return action.Permanentf("error in mime-type extraction: %v", err)
				}
				return c.core("mime_type", m)
			}},
		{ChainAction: Chain[2], doc: "Set the file set's chain waiting: the steps of its workflow that apply to it.", concurrency: 8,
			done: func(ctx context.Context, c *call) (bool, error) {
				st, err := c.db.ActionStates(ctx, c.id)
				return len(st) > len(initialActions), err
			},
			work: func(ctx context.Context, c *call) error { return s.initializeDispatch(ctx, c) }},
		{ChainAction: Chain[3], doc: "Compute the file's sha256, sha1 and md5, and identify its format by PRONOM's signatures (its PUID), in one read.",
			concurrency: 4, done: hasCore("digests"),
			work: func(ctx context.Context, c *call) error {
				d, id, err := c.digests(ctx, c.md("location"))
				if err != nil {
					return err
				}
				if id.PUID() != "" {
					c.notes = "PRONOM " + id.PUID() + " (" + id.Basis + ")"
				}
				return writeOp(c.out, "core.digests", write{Op: opCore, FileSetID: c.id, Core: map[string]any{"digests": d, "pronom": id}})
			}},
		{ChainAction: Chain[4], doc: "Extract the file's EXIF and other embedded metadata (exiftool).", concurrency: 2, tempDir: true,
			done: hasCore("exif"), work: exif},
		{ChainAction: Chain[5], doc: "Copy the file to preservation: the blob store, under its SHA-256.", concurrency: 4,
			done: func(ctx context.Context, c *call) (bool, error) {
				f, err := c.fileSet(ctx)
				if err != nil {
					return false, err
				}
				sum, _ := f.Core["preservation_sha256"].(string)
				if sum == "" {
					return false, nil
				}
				_, err = c.blobs.Stat(ctx, sum)
				return err == nil, nil
			},
			work: copyToPreservation},
		{ChainAction: Chain[6], doc: "Attach the transcription the sheet named (a .txt) to the file set.", concurrency: 4,
			done: hasDerivative("transcription"), work: attachTranscription},
		{ChainAction: Chain[7], doc: "Record the derivative copy of an auxiliary PDF or zip.", concurrency: 4,
			done: hasDerivative("copy"), work: derivativeCopy},
		{ChainAction: Chain[8], doc: "Make a pyramid TIFF and a thumbnail of an image (vips).", concurrency: 2, tempDir: true,
			timeout: 30 * time.Minute, done: hasDerivative("pyramid_tiff"), work: pyramidTIFF},
		{ChainAction: Chain[9], doc: "Generate an image's metadata with the command or HTTP service the step's with: names (command, url); the JSON object it returns is the file set's ai_metadata. Skipped (ok, with a note) when neither is set.",
			concurrency: 2, tempDir: true, timeout: 30 * time.Minute, done: hasCore("ai_metadata"),
			settings: aiSettings.Settings(), validate: aiSettings.Validate, skip: aiUnconfigured, work: s.generateAIMetadata},
		{ChainAction: Chain[10], doc: "Extract audio or video metadata (ffprobe).", concurrency: 2, tempDir: true,
			done: hasCore("mediainfo"), work: mediaMetadata},
		{ChainAction: Chain[11], doc: "Create the transcoding job, whose completion comes back as the external event transcoded.", concurrency: 4,
			work: createTranscodeJob},
		{ChainAction: Chain[12], doc: "Record a transcoding job's end from its Job State Change event: playlists, or the job's error.",
			concurrency: 4, work: transcodeComplete},
		{ChainAction: Chain[13], doc: "Complete a file set.", concurrency: 8,
			work: func(ctx context.Context, c *call) error {
				return writeOp(c.out, "complete", write{Op: opCore, FileSetID: c.id, State: StateComplete, Core: map[string]any{}})
			}},
	}
}

// initializeDispatch sets waiting the actions of the file set's chain: the chain actions of its
// workflow's steps that apply to it (those whose `when:` held as it was created, which the
// engine recorded by skipping the others). A file set to which none applies has a role and
// MIME type that go together nowhere in the table.
func (s *Service) initializeDispatch(ctx context.Context, c *call) error {
	steps, err := c.db.ItemSteps(ctx, c.t.Item.ID)
	if err != nil {
		return err
	}
	applies := map[string]bool{}
	for _, st := range steps {
		if st.State != record.TaskSkipped {
			applies[st.Action] = true
		}
	}
	var chain []string
	for _, a := range Chain[3:] {
		if applies[a.Action] {
			chain = append(chain, a.State)
		}
	}
	if len(chain) <= 1 { // FileSetComplete alone
		return action.Permanentf("Invalid mime-type and file set role combination: %s, role %s", c.t.Item.ContentType, c.md("role"))
	}
	for _, a := range chain {
		if err := c.setState(a, OutcomeWaiting, ""); err != nil {
			return err
		}
	}
	c.notes = strings.Join(chain, " → ")
	return nil
}

// digests reads the file at location once for its sha256, sha1 and md5, and its PRONOM
// identification (from its first and last bytes, kept as they pass).
func (c *call) digests(ctx context.Context, location string) (map[string]string, *pronom.Result, error) {
	f, err := c.open(ctx, location, 0)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	h256, h1, h5 := sha256.New(), sha1.New(), md5.New()
	id, _, err := pronom.IdentifyReader(location, f, io.MultiWriter(h256, h1, h5))
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", location, err)
	}
	return map[string]string{"sha256": hex.EncodeToString(h256.Sum(nil)), "sha1": hex.EncodeToString(h1.Sum(nil)),
		"md5": hex.EncodeToString(h5.Sum(nil))}, id, nil
}

// putFile streams a file set's file (a local path inside the files directory, or an s3:// URL)
// into the blob store and returns its SHA-256 and size.
func (c *call) putFile(ctx context.Context, location string) (string, int64, error) {
	f, err := c.open(ctx, location, 0)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	return c.blobs.Put(ctx, f)
}

// copyToPreservation copies the file into the blob store under its SHA-256 — unless a
// preservation copy of the same digest is already there (Meadow's "files already present"):
// another file set's, of the same bytes, referenced by the domain so that the blob collector
// keeps it. Then the file is not read again; the notes say "already present".
func copyToPreservation(ctx context.Context, c *call) error {
	p := c.md("location")
	f, err := c.fileSet(ctx)
	if err != nil {
		return err
	}
	var digest string
	if d, ok := f.Core["digests"].(map[string]any); ok {
		digest, _ = d["sha256"].(string)
	}
	present, err := c.preserved(ctx, digest)
	if err != nil {
		return err
	}
	sum := digest
	if present {
		c.notes = "already present: sha256:" + sum
	} else {
		if sum, _, err = c.putFile(ctx, p); err != nil {
			return err
		}
		if digest != "" && digest != sum {
			return action.Permanentf("%s changed since its digests were computed (sha256 %s, now %s)", p, digest, sum)
		}
		c.notes = "sha256:" + sum
	}
	if err := c.blob("preservation", sum); err != nil {
		return err
	}
	if err := c.core("preservation_sha256", sum); err != nil {
		return err
	}
	return c.core("preservation_location", fmt.Sprintf("sha256/%s/%s/%s", sum[:2], sum[2:4], sum))
}

// preserved reports whether the blob store holds a preservation copy with the SHA-256 that a
// file set (any) references.
func (c *call) preserved(ctx context.Context, sum string) (bool, error) {
	if sum == "" {
		return false, nil
	}
	if ok, err := c.db.BlobReferencedAs(ctx, sum, "preservation"); err != nil || !ok {
		return false, err
	}
	if _, err := c.blobs.Stat(ctx, sum); err != nil {
		if errors.Is(err, blob.ErrNotFound) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

func attachTranscription(ctx context.Context, c *call) error {
	p := c.md("transcription")
	if p == "" {
		c.notes = "no transcription file"
		return nil
	}
	sum, size, err := c.putFile(ctx, p)
	if err != nil {
		return err
	}
	if err := c.blob("transcription", sum); err != nil {
		return err
	}
	return c.derivative("transcription", map[string]any{"sha256": sum, "size": size})
}

func derivativeCopy(ctx context.Context, c *call) error {
	f, err := c.fileSet(ctx)
	if err != nil {
		return err
	}
	sum, _ := f.Core["preservation_sha256"].(string)
	if sum == "" { // a custom chain without the preservation copy
		if sum, _, err = c.putFile(ctx, c.md("location")); err != nil {
			return err
		}
	}
	size, err := c.blobs.Stat(ctx, sum)
	if err != nil {
		return fmt.Errorf("derivative copy of %s: %w", sum, err)
	}
	if err := c.blob("copy", sum); err != nil {
		return err
	}
	return c.derivative("copy", map[string]any{"sha256": sum, "size": size})
}

// TranscodeEvent is the external event a transcoder's Job State Change fires.
const TranscodeEvent = "transcoded"

func createTranscodeJob(ctx context.Context, c *call) error {
	f, err := c.fileSet(ctx)
	if err != nil {
		return err
	}
	input, _ := f.Core["preservation_location"].(string)
	if input == "" {
		input = c.md("location")
	}
	job := map[string]any{
		"UserMetadata": map[string]any{"file_set_id": c.id, "accession_number": f.Accession, "work_accession_number": f.WorkAccession},
		"Settings": map[string]any{
			"Inputs": []any{map[string]any{"FileInput": input}},
			"OutputGroups": []any{map[string]any{"OutputGroupSettings": map[string]any{"Type": "HLS_GROUP_SETTINGS",
				"HlsGroupSettings": map[string]any{"Destination": "streaming/" + pairtree(c.id) + "/"}}}},
		},
	}
	// TranscodeComplete stays waiting, as Meadow leaves it, until the job's event arrives.
	c.notes = "transcode job created; TranscodeComplete waits for its Job State Change event"
	return c.core("transcode_job", job)
}

// pairtree lays an id out as Meadow's storage does: its hex digits in pairs.
func pairtree(id string) string {
	h := strings.ReplaceAll(id, "-", "")
	var parts []string
	for i := 0; i+2 <= len(h) && i < 8; i += 2 {
		parts = append(parts, h[i:i+2])
	}
	return strings.Join(parts, "/") + "/" + id
}

func transcodeComplete(ctx context.Context, c *call) error {
	md := c.t.Item.Metadata
	status := str(md, "transcode_status")
	switch status {
	case "COMPLETE":
		var playlists []string
		groups, _ := md["transcode_output_groups"].([]any)
		for _, g := range groups {
			gm, _ := g.(map[string]any)
			ps, _ := gm["playlistFilePaths"].([]any)
			for _, p := range ps {
				if s, ok := p.(string); ok {
					playlists = append(playlists, s)
				}
			}
		}
		if len(playlists) == 0 {
			return action.Permanentf("transcode job %s completed without a playlist", str(md, "transcode_job_id"))
		}
		slices.Sort(playlists)
		c.notes = strings.Join(playlists, " ")
		if err := c.core("streaming", map[string]any{"job_id": str(md, "transcode_job_id"), "playlists": playlists}); err != nil {
			return err
		}
		return c.derivative("playlist", playlists)
	case "ERROR":
		return action.Permanentf("%v (transcode job %s, error code %v)", md["transcode_error_message"], str(md, "transcode_job_id"), md["transcode_error_code"])
	case "":
		return action.Permanentf("no Job State Change event arrived for file set %s", c.id)
	}
	return action.Permanentf("transcode job %s ended %s", str(md, "transcode_job_id"), status)
}

// fileSetFailed records a failed file set: the first action of its chain not yet done gets
// the state error with the item's error, every other waiting one "Previous action failed", and
// the file set the state error.
func (s *Service) fileSetFailed(ctx context.Context, t *action.Task, out action.Output) error {
	db, err := portOf(ctx)
	if err != nil {
		return err
	}
	c := &call{s: s, db: db, t: t, out: out, id: str(t.Item.Metadata, "file_set_id")}
	if c.id == "" {
		return action.Permanentf("item %d is not a file set (no file_set_id)", t.Item.ID)
	}
	states, err := c.db.ActionStates(ctx, c.id)
	if err != nil {
		return err
	}
	outcome := map[string]string{}
	for _, st := range states {
		outcome[st.Action] = st.Outcome
	}
	msg := t.Item.Error
	if msg == "" {
		msg = "the file set failed"
	}
	first := true
	for _, a := range Chain {
		switch outcome[a.State] {
		case OutcomeWaiting, OutcomeStarted:
			note := "Previous action failed"
			if first {
				note, first = msg, false
			}
			if err := c.setState(a.State, OutcomeError, note); err != nil {
				return err
			}
		}
	}
	return writeOp(out, "failed", write{Op: opCore, FileSetID: c.id, State: StateError, Core: map[string]any{"error": msg}})
}
