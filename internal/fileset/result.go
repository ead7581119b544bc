package fileset

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/metadata"
)

type resultAction struct{ s *Fileset }

func (a resultAction) Spec() action.Spec {
	return action.Spec{Name: "fileset-result", Doc: "summarise a dataset request: its result, ingest_fileset_platform, the dataset-file result",
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
			removePartial(a.s.partialPath(t.JobID, k.id))
		}
	}
	res, fileRes := compose(t.Item, kids)
	var folder *ItemFolder
	if strings.HasPrefix(res.IngestStrategy, "archiveorg-") && res.Hit && res.Status != StatusSuccessExisting {
		// The item folder: its files are the file items' blobs; its _meta.xml and _files.xml
		// go into the blob store now, named by the result's row (no children: the request's
		// children are done).
		reads, err := engine.ReadsOf(ctx)
		if err != nil {
			return err
		}
		var item PlatformItem
		decodeMD(t.Item.Metadata, mdPlatform, &item)
		if folder, err = writeItemFolder(ctx, reads.Blobs(), &res, &item, a.s.cfg.Now()); err != nil {
			return fmt.Errorf("write the archive.org item %s: %w", res.ArchiveorgItemName, err)
		}
	}
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
			Payload: resultWrite{Updated: a.s.cfg.Now().UnixNano(), Result: res, Folder: folder}})
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
		if metadata.Unmarshal(it.Metadata, &md) == nil {
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
	reqJSON := []byte("{}")
	if obj := requestObject(md); obj != nil {
		reqJSON, _ = json.Marshal(obj)
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
	var landing landingCapture
	if decodeMD(md, mdLanding, &landing) {
		res.FileMeta, res.CDX = &landing.FileMeta, &landing.CDX
	}
	var bib HTMLBiblio
	if decodeMD(md, mdBiblio, &bib) {
		res.HTMLBiblio = &bib
	}
	var item PlatformItem
	var m platformMatch
	switch {
	case decodeMD(md, mdPlatform, &item):
		res.PlatformName, res.PlatformDomain, res.PlatformID = item.PlatformName, item.PlatformDomain, item.PlatformID
		res.PlatformBaseURL, res.ArchiveorgItemName = item.PlatformBaseURL, item.ArchiveorgItemName
		// The platform was read: its manifest, empty or not, and counts are the result's.
		res.Manifest = item.Manifest
		if res.Manifest == nil {
			res.Manifest = []ManifestFile{}
		}
	case decodeMD(md, mdMatch, &m):
		// The platform matched and ended the request before a manifest: what the URL says.
		res.PlatformName, res.PlatformDomain, res.PlatformID, res.PlatformBaseURL = m.Platform, m.Domain, m.ID, m.BaseURL
	}
	res.IngestStrategy, _ = md[mdStrategy].(string)
	if !strings.HasPrefix(res.IngestStrategy, "archiveorg-") {
		res.ArchiveorgItemName = ""
	}
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
	// Sandcrawler's file-ingest result: its request is the dataset's, of ingest_type
	// dataset-file (the request's type and "-file").
	var fileReq map[string]any
	_ = metadata.Unmarshal(reqJSON, &fileReq)
	if fileReq == nil {
		fileReq = map[string]any{}
	}
	typ, _ := fileReq["ingest_type"].(string)
	if typ == "" {
		typ = "dataset"
	}
	fileReq["ingest_type"] = typ + "-file"
	fileReqJSON, _ := json.Marshal(fileReq)
	fr := &FileResult{Hit: true, Status: StatusSuccess, Request: fileReqJSON,
		FileMeta: FileMeta{Size: *f.Size, MD5: f.MD5, SHA1: f.SHA1, SHA256: f.SHA256, Mimetype: f.Mimetype},
		Terminal: &Terminal{URL: f.TerminalURL, StatusCode: 200, DT: f.TerminalDT, SHA1: f.SHA1}}
	for _, k := range kids {
		if k.ordinal == 0 && k.outcome != nil {
			fr.CDX = k.outcome.CDX
		}
	}
	res.FilesetFile = &FilesetFile{FileMeta: fr.FileMeta, Terminal: fr.Terminal, CDX: fr.CDX}
	return res, fr
}

// filesStatus merges the files' outcomes into the manifest and returns the overall status: the
// first file's that is not success, else success (success-file for a *-file strategy).
func filesStatus(res *Result, kids []fileChild) string {
	if bundled(res.IngestStrategy) {
		return bundleStatus(res, kids)
	}
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

// bundleStatus is filesStatus for a bundled strategy: its one download is the bundle, and each
// manifest file is verified against the bundle's file of its path. The result's fileset_bundle
// is the bundle.
func bundleStatus(res *Result, kids []fileChild) string {
	if len(kids) != 1 {
		res.ErrorMessage = fmt.Sprintf("%d downloads for a bundle", len(kids))
		return StatusPlatformError
	}
	k := kids[0]
	switch {
	case k.outcome == nil:
		res.ErrorMessage = capError("the bundle: " + k.err)
		return StatusErrorPlatformDownload
	case k.outcome.Status != StatusSuccess:
		res.ErrorMessage = k.outcome.Error
		return k.outcome.Status
	}
	o := k.outcome
	b := &FilesetBundle{FileMeta: o.FileMeta, Terminal: &Terminal{URL: o.TerminalURL, StatusCode: 200, DT: o.TerminalDT, SHA1: o.SHA1}, CDX: o.CDX}
	if strings.HasPrefix(res.IngestStrategy, "archiveorg-") {
		name := o.TerminalURL[strings.LastIndex(o.TerminalURL, "/")+1:]
		if i := strings.IndexByte(name, '?'); i >= 0 {
			name = name[:i]
		}
		b.ArchiveorgBundlePath = res.ArchiveorgItemName + "/" + safeName(name)
		res.ArchiveorgItemBundlePath = b.ArchiveorgBundlePath
	}
	res.FilesetBundle = b
	res.Manifest = append([]ManifestFile(nil), res.Manifest...)
	overall := StatusSuccess
	for i, st := range verifyBundled(res.Manifest, o.Interior) {
		f := &res.Manifest[i]
		f.Status = st
		if st == StatusSuccess {
			f.TerminalURL, f.TerminalDT = o.TerminalURL, o.TerminalDT
		} else if overall == StatusSuccess {
			overall, res.ErrorMessage = st, bundleError(*f, st)
		}
	}
	return overall
}
