package fileset

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/engine"
)

type resultAction struct{ s *Fileset }

func (a resultAction) Spec() action.Spec {
	return action.Spec{Name: "fileset-result", Doc: "summarise a dataset request: its result, fileset_results, the dataset-file result",
		Outcomes: []string{EventFileResult}, Concurrency: 8}
}

// Policy runs the action inline where it can: a request decided before any download has no
// files to read, so its result is made from the item alone, in the transaction that readies
// the step.
func (a resultAction) Policy() action.Policy {
	return action.Policy{NoTempDir: true, Inline: func(it action.Item) bool { return it.NChildren == 0 }}
}

// fileChild is what the result step reads of a file item.
type fileChild struct {
	id      int64
	ordinal int
	outcome *fileOutcome
	err     string
}

func (a resultAction) Run(ctx context.Context, t *action.Task, out action.Output) error {
	var kids []fileChild
	if t.Item.NChildren > 0 {
		reads, err := engine.ReadsOf(ctx)
		if err != nil {
			return err
		}
		step, _ := t.Item.Metadata[mdFilesStep].(string)
		if kids, err = fileChildren(ctx, reads, t.Item.ID, step); err != nil {
			return err
		}
		// Every file is done: the partial files its downloads kept (in this process's data
		// dir) go.
		for _, k := range kids {
			_ = os.Remove(a.s.partialPath(t.JobID, k.id))
		}
	}
	res, fileRes := compose(t.Item, kids)
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	if err := out.SetOutput(ctx, KindResult, b); err != nil {
		return err
	}
	out.SetMetadata(map[string]any{mdStatus: res.Status})
	if fileRes != nil {
		fb, _ := json.Marshal(fileRes)
		if err := out.SetOutput(ctx, KindFileResult, fb); err != nil {
			return err
		}
		// Also in the metadata: a message published on the event carries the item's metadata
		// (a step's own messages carry its outputs).
		out.SetMetadata(map[string]any{KindFileResult: asMap(fileRes)})
		out.Emit(EventFileResult)
	}
	// Only a result whose platform was identified has a row; a success-existing result leaves
	// the row of the result it found.
	if res.PlatformName != "" && res.Status != StatusSuccessExisting {
		var req Request
		_ = json.Unmarshal(res.Request, &req)
		return out.Write(action.DomainWrite{Domain: DomainName, Key: req.IngestType + " " + req.BaseURL,
			Payload: resultWrite{Updated: a.s.cfg.Now().UnixNano(), Result: res}})
	}
	return nil
}

// fileChildren reads the outcomes of a request's file items, made by the step named step, in
// ordinal order (through the index of items by parent: a listing by job would scan the job).
func fileChildren(ctx context.Context, reads Reads, parent int64, step string) ([]fileChild, error) {
	items, err := reads.StepChildren(ctx, parent, step)
	if err != nil {
		return nil, fmt.Errorf("list the files of item %d: %w", parent, err)
	}
	out := make([]fileChild, 0, len(items))
	for _, it := range items {
		c := fileChild{id: it.ID, ordinal: it.Ordinal, err: it.Error}
		var md map[string]any
		if json.Unmarshal(it.Metadata, &md) == nil {
			var oc fileOutcome
			if decodeMD(md, mdFileResult, &oc) {
				c.outcome = &oc
			}
		}
		out = append(out, c)
	}
	return out, nil
}

// compose makes a request's result from its item's findings and its files' outcomes; for a
// single-file success, also the dataset-file result.
func compose(it action.Item, kids []fileChild) (Result, *FileResult) {
	md := it.Metadata
	reqJSON, _ := json.Marshal(md[mdRequest])
	if md[mdRequest] == nil {
		reqJSON = []byte("{}")
	}
	var existing Result
	if decodeMD(md, mdExisting, &existing) {
		existing.Status, existing.Hit, existing.Request, existing.ErrorMessage = StatusSuccessExisting, true, reqJSON, ""
		return existing, nil
	}
	res := Result{Request: reqJSON}
	var term Terminal
	if decodeMD(md, mdTerminal, &term) {
		res.Terminal = &term
	}
	var item PlatformItem
	if decodeMD(md, mdPlatform, &item) {
		res.PlatformName, res.PlatformDomain, res.PlatformID = item.PlatformName, item.PlatformDomain, item.PlatformID
		res.PlatformBaseURL, res.ArchiveorgItemName = item.PlatformBaseURL, item.ArchiveorgItemName
		res.Manifest = item.Manifest
	}
	res.IngestStrategy, _ = md[mdStrategy].(string)
	switch st, _ := md[mdStatus].(string); {
	case st != "" && len(kids) == 0:
		res.Status = st
		res.ErrorMessage, _ = md[mdError].(string)
	case res.IngestStrategy == "":
		// No step decided a status and none chose a strategy: one failed for good.
		res.Status, res.ErrorMessage = StatusPlatformError, capError("a step failed: "+it.Error)
	default:
		res.Status = filesStatus(&res, kids)
	}
	res.Hit = strings.HasPrefix(res.Status, "success")
	if res.Manifest != nil {
		n := len(res.Manifest)
		var total int64
		for _, f := range res.Manifest {
			if f.Size != nil {
				total += *f.Size
			}
		}
		if item.ManifestTruncated > 0 {
			n = item.ManifestTruncated
		}
		res.FileCount, res.TotalSize = &n, &total
	}
	if res.Status != StatusSuccessFile {
		return res, nil
	}
	f := res.Manifest[0]
	fr := &FileResult{IngestType: "dataset-file", Hit: true, Status: StatusSuccess, Request: reqJSON,
		FileMeta: FileMeta{Size: *f.Size, MD5: f.MD5, SHA1: f.SHA1, SHA256: f.SHA256, Mimetype: f.Mimetype},
		Terminal: &Terminal{URL: f.TerminalURL, StatusCode: 200, DT: f.TerminalDT}}
	res.FilesetFile = &FileResult{Hit: true, FileMeta: fr.FileMeta, Terminal: fr.Terminal}
	return res, fr
}

// filesStatus merges the files' outcomes into the manifest and returns the overall status: the
// first file's that is not success, else success (success-file for a *-file strategy).
func filesStatus(res *Result, kids []fileChild) string {
	if len(kids) != len(res.Manifest) {
		res.ErrorMessage = fmt.Sprintf("%d files downloaded for a manifest of %d", len(kids), len(res.Manifest))
		return StatusPlatformError
	}
	res.Manifest = append([]ManifestFile(nil), res.Manifest...)
	overall := ""
	for _, k := range kids {
		if k.ordinal < 0 || k.ordinal >= len(res.Manifest) {
			continue
		}
		f := &res.Manifest[k.ordinal]
		switch {
		case k.outcome == nil:
			f.Status = StatusErrorPlatformDownload
			if overall == "" {
				res.ErrorMessage = capError(f.Path + ": " + k.err)
			}
		case k.outcome.Status != StatusSuccess:
			f.Status = k.outcome.Status
			if overall == "" {
				res.ErrorMessage = k.outcome.Error
			}
		default:
			o := k.outcome
			f.Status = StatusSuccess
			f.Size = int64p(o.Size)
			f.MD5, f.SHA1, f.SHA256 = o.MD5, o.SHA1, o.SHA256
			if f.Mimetype == "" {
				f.Mimetype = o.Mimetype
			}
			f.TerminalURL, f.TerminalDT = o.TerminalURL, o.TerminalDT
		}
		if f.Status != StatusSuccess && overall == "" {
			overall = f.Status
		}
	}
	if overall != "" {
		return overall
	}
	if strings.HasSuffix(res.IngestStrategy, "-file") {
		return StatusSuccessFile
	}
	return StatusSuccess
}
