// Package fileset is the domain of dataset ingest, after Sandcrawler's fileset ingest: a request
// names a dataset's landing page; the `fileset` workflow finds its hosting platform (Dataverse,
// Figshare, Zenodo, archive.org — each a step of its own), reads the platform's manifest, checks
// limits, chooses a strategy from the file count and sizes, downloads every file in a task of
// its own with size and hash verification into the blob store, and records one result per
// request, with Sandcrawler's status vocabulary.
//
// The package provides the workflow's actions ([Fileset.Actions]) and the ingest_fileset_platform table
// ([Domain]): a result is upserted there, keyed by (ingest_type, base_url), when its platform was
// identified, and a later request for the same dataset is `success-existing` without a byte
// downloaded. Every outbound connection obeys the node's egress policy (internal/egress).
package fileset

import "encoding/json"

// Request is an ingest request, as Sandcrawler's: the root item's metadata holds its fields.
type Request struct {
	IngestType          string            `json:"ingest_type"`
	BaseURL             string            `json:"base_url"`
	LinkSource          string            `json:"link_source,omitempty"`
	LinkSourceID        string            `json:"link_source_id,omitempty"`
	IngestRequestSource string            `json:"ingest_request_source,omitempty"`
	ReleaseStage        string            `json:"release_stage,omitempty"`
	ForceRecrawl        bool              `json:"force_recrawl,omitempty"`
	ExtIDs              map[string]string `json:"ext_ids,omitempty"`
	Fatcat              map[string]string `json:"fatcat,omitempty"`
}

// ManifestFile is one file of a dataset's manifest, with what its download found.
type ManifestFile struct {
	Path        string         `json:"path"`
	Size        *int64         `json:"size,omitempty"`
	MD5         string         `json:"md5,omitempty"`
	SHA1        string         `json:"sha1,omitempty"`
	SHA256      string         `json:"sha256,omitempty"`
	Mimetype    string         `json:"mimetype,omitempty"`
	Extra       map[string]any `json:"extra,omitempty"`
	Status      string         `json:"status,omitempty"`
	PlatformURL string         `json:"platform_url,omitempty"`
	TerminalURL string         `json:"terminal_url,omitempty"`
	TerminalDT  string         `json:"terminal_dt,omitempty"`
}

// PlatformItem is what a platform step learned about a dataset.
type PlatformItem struct {
	PlatformName       string         `json:"platform_name"`
	PlatformStatus     string         `json:"platform_status,omitempty"`
	PlatformDomain     string         `json:"platform_domain,omitempty"`
	PlatformID         string         `json:"platform_id,omitempty"`
	PlatformBaseURL    string         `json:"platform_base_url,omitempty"`
	Manifest           []ManifestFile `json:"manifest,omitempty"`
	ArchiveorgItemName string         `json:"archiveorg_item_name,omitempty"`
	ArchiveorgItemMeta map[string]any `json:"archiveorg_item_meta,omitempty"`
	WebBundleURL       string         `json:"web_bundle_url,omitempty"`
	// ManifestTruncated is the manifest's length when it was longer than
	// [Limits.MaxManifest] and cut to [Limits.MaxFileCount] entries.
	ManifestTruncated int `json:"manifest_truncated,omitempty"`
}

// Terminal is where the request's landing page (or a file's download) led.
type Terminal struct {
	URL        string `json:"terminal_url"`
	StatusCode int    `json:"terminal_status_code"`
	DT         string `json:"terminal_dt,omitempty"`
	// SHA1 is the terminal body's sha1 (a file's, in a dataset-file result).
	SHA1 string `json:"terminal_sha1hex,omitempty"`
}

// Result is the result of one request (Sandcrawler's fileset ingest result).
type Result struct {
	Hit      bool            `json:"hit"`
	Status   string          `json:"status"`
	Request  json.RawMessage `json:"request"`
	Terminal *Terminal       `json:"terminal,omitempty"`
	// FileMeta and CDX are the landing page's: its body, and its capture's CDX line.
	FileMeta        *FileMeta   `json:"file_meta,omitempty"`
	CDX             *CDX        `json:"cdx,omitempty"`
	ErrorMessage    string      `json:"error_message,omitempty"`
	HTMLBiblio      *HTMLBiblio `json:"html_biblio,omitempty"`
	PlatformName    string      `json:"platform_name,omitempty"`
	PlatformDomain  string      `json:"platform_domain,omitempty"`
	PlatformID      string      `json:"platform_id,omitempty"`
	PlatformBaseURL string      `json:"platform_base_url,omitempty"`
	// ArchiveorgItemName is set only for the archiveorg-* strategies.
	ArchiveorgItemName string `json:"archiveorg_item_name,omitempty"`
	// Manifest is present once the platform's manifest was read, empty for empty-manifest
	// (MarshalJSON writes an empty one as []).
	Manifest       []ManifestFile `json:"manifest,omitempty"`
	FileCount      *int           `json:"file_count,omitempty"`
	TotalSize      *int64         `json:"total_size,omitempty"`
	IngestStrategy string         `json:"ingest_strategy,omitempty"`
	// FilesetFile is the single file of a `*-file` strategy's success.
	FilesetFile *FilesetFile `json:"fileset_file,omitempty"`
	// FilesetBundle is the bundle of a `*-fileset-bundled` strategy.
	FilesetBundle *FilesetBundle `json:"fileset_bundle,omitempty"`
	// ArchiveorgItemBundlePath is the bundle's path in the archive.org item
	// (archiveorg-fileset-bundled), as ingest_fileset_platform's column of that name.
	ArchiveorgItemBundlePath string `json:"archiveorg_item_bundle_path,omitempty"`
}

// MarshalJSON writes the result, with an empty manifest that was read as [] (Go's omitempty
// drops any empty slice; nil stays absent).
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result
	if r.Manifest == nil || len(r.Manifest) > 0 {
		return json.Marshal(plain(r))
	}
	return json.Marshal(struct {
		plain
		Manifest []ManifestFile `json:"manifest"`
	}{plain(r), r.Manifest})
}

// FileResult is the `dataset-file` result a single-file success also emits (the file-ingest
// result of Sandcrawler's file pipeline: its request's ingest_type is dataset-file).
type FileResult struct {
	Hit      bool            `json:"hit"`
	Status   string          `json:"status,omitempty"`
	Request  json.RawMessage `json:"request,omitempty"`
	FileMeta FileMeta        `json:"file_meta"`
	Terminal *Terminal       `json:"terminal,omitempty"`
	// CDX is the capture's line, for web-file.
	CDX *CDX `json:"cdx,omitempty"`
}

// FilesetFile is a `*-file` strategy's file (Sandcrawler's fileset_file): what was downloaded,
// from where, and — for web-file — its capture's CDX line.
type FilesetFile struct {
	FileMeta FileMeta  `json:"file_meta"`
	Terminal *Terminal `json:"terminal,omitempty"`
	CDX      *CDX      `json:"cdx,omitempty"`
}

// FilesetBundle is a `*-fileset-bundled` strategy's bundle (Sandcrawler's fileset_bundle): the
// download-all archive as downloaded, its capture (web) or its path in the item (archiveorg).
type FilesetBundle struct {
	FileMeta             FileMeta  `json:"file_meta"`
	Terminal             *Terminal `json:"terminal,omitempty"`
	CDX                  *CDX      `json:"cdx,omitempty"`
	ArchiveorgBundlePath string    `json:"archiveorg_bundle_path,omitempty"`
}

// FileMeta describes downloaded bytes.
type FileMeta struct {
	Size     int64  `json:"size_bytes"`
	MD5      string `json:"md5hex"`
	SHA1     string `json:"sha1hex"`
	SHA256   string `json:"sha256hex"`
	Mimetype string `json:"mimetype,omitempty"`
}

// The statuses of a result and of a manifest file, Sandcrawler's vocabulary.
const (
	StatusSuccess         = "success"
	StatusSuccessFile     = "success-file"
	StatusSuccessExisting = "success-existing"

	StatusNoCapture         = "no-capture"          // the landing page could not be fetched at all
	StatusTerminalBadStatus = "terminal-bad-status" // the landing page or a file answered 4xx/5xx
	StatusRedirectLoop      = "redirect-loop"
	StatusRedirectsExceeded = "redirects-exceeded"
	StatusBadRedirect       = "bad-redirect"       // a Location that is not http(s) or leads where egress refuses
	StatusSkipURLBlocklist  = "skip-url-blocklist" // a URL that is not http(s) or that egress refuses
	StatusBodyTooLarge      = "body-too-large"

	StatusNoPlatformMatch    = "no-platform-match"
	StatusPlatformScope      = "platform-scope"
	StatusPlatformRestricted = "platform-restricted"
	StatusPlatform404        = "platform-404"
	StatusPlatformHTTPError  = "platform-http-error"
	StatusPlatformError      = "platform-error"

	StatusEmptyManifest = "empty-manifest"
	StatusTooLargeSize  = "too-large-size"
	StatusTooManyFiles  = "too-many-files"

	StatusMismatchSize          = "mismatch-size"
	StatusMismatchMD5           = "mismatch-md5"
	StatusMismatchSHA1          = "mismatch-sha1"
	StatusMismatchSHA256        = "mismatch-sha256"
	StatusUnsafePath            = "unsafe-path"
	StatusErrorPlatformDownload = "error-platform-download"
	StatusEmptyBlob             = "empty-blob"
)

// The strategies.
const (
	StrategyWebFile           = "web-file"
	StrategyWebFileset        = "web-fileset"
	StrategyArchiveorgFile    = "archiveorg-file"
	StrategyArchiveorgFileset = "archiveorg-fileset"
	// The bundled strategies store the platform's download-all archive (one zip) and list its
	// interior files in the manifest.
	StrategyWebFilesetBundled        = "web-fileset-bundled"
	StrategyArchiveorgFilesetBundled = "archiveorg-fileset-bundled"
)

// MaxErrorLen caps error text in results, as Sandcrawler does.
const MaxErrorLen = 1600

func capError(s string) string {
	if len(s) <= MaxErrorLen {
		return s
	}
	// Cut at a rune boundary at or below the cap.
	cut := MaxErrorLen
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut]
}
