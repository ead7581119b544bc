package fileset

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/egress"
	"github.com/sluice-project/sluice/internal/record"
)

// Config configures [New]. The zero value reaches the public platforms under the default egress
// policy with Sandcrawler's limits.
type Config struct {
	// Egress is the policy every connection obeys. Nil is egress's default: loopback, private and
	// link-local addresses refused.
	Egress *egress.Policy
	// Platforms says where the platforms are.
	Platforms Platforms
	// Limits bound what a request may download.
	Limits Limits
	// MaxRedirects bounds the redirects of one request. Defaults to 10.
	MaxRedirects int
	// Timeout bounds the wait for a response's headers. Defaults to 60s.
	Timeout time.Duration
	// MaxFileSize bounds a file whose manifest gives no size. Defaults to Limits.MaxTotalSize.
	MaxFileSize int64
	// PartialDir holds downloads in progress (one partial file per file item), kept across
	// attempts so an interrupted download resumes. Defaults to a directory under os.TempDir().
	PartialDir string
	// Now is the clock of results' times. Defaults to time.Now.
	Now func() time.Time
	// HostDelay is the politeness delay of the workflow's jobs ([Fileset.Workflow]): the least
	// time between the starts of two downloads from one host, across every process sharing the
	// store (the download step's limit: rate). 0 means DefaultHostDelay; negative, none.
	HostDelay time.Duration
	// Sinks are the sinks configured where the workflow is applied: it keeps the publish: rules
	// naming them — SinkName (Sluice's envelope), SandcrawlerSinkName (Sandcrawler's bare
	// results). Without, results are published nowhere (they are in ingest_fileset_platform and
	// the job's outputs) and nothing waits in the outbox.
	Sinks []string
}

// Fileset is the fileset workflow's actions and what they share: the configuration and the HTTP
// client. What they read of the core, of ingest_fileset_platform and of the blob store comes with each
// task, through its read port ([engine.Reads]; see [Reads]), so they run in process or in a
// remote worker alike. Safe for concurrent use.
type Fileset struct {
	cfg   Config
	fetch *fetcher
	// downloaded counts the bytes this process's downloads received.
	downloaded atomic.Int64
}

// Downloaded returns how many bytes this process's downloads have received, verified or not.
func (s *Fileset) Downloaded() int64 { return s.downloaded.Load() }

// Reads is what the fileset actions read of the core besides their task: the items a step made
// of an item (a request's files, a file's stored blob). It is part of their task's read port
// ([engine.Reads]), which also serves their reads of ingest_fileset_platform and of the CDX
// index ([Domain.ReadQueries]) and the blob store; the engine serves it in process, the server
// to a remote worker. An action holds no store.
type Reads interface {
	// StepChildren returns the children the step named step made of item parent, in ordinal
	// order.
	StepChildren(ctx context.Context, parent int64, step string) ([]*record.Item, error)
}

// New returns the fileset actions with cfg.
func New(cfg Config) *Fileset {
	cfg.Platforms = cfg.Platforms.withDefaults()
	cfg.Limits = cfg.Limits.withDefaults()
	if cfg.MaxRedirects <= 0 {
		cfg.MaxRedirects = 10
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 60 * time.Second
	}
	if cfg.MaxFileSize <= 0 {
		cfg.MaxFileSize = cfg.Limits.MaxTotalSize
	}
	if cfg.PartialDir == "" {
		cfg.PartialDir = filepath.Join(os.TempDir(), "sluice-fileset-partial")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Fileset{cfg: cfg, fetch: newFetcher(cfg.Egress, cfg.MaxRedirects, cfg.Timeout, apiBoundsFor(cfg.Limits.MaxManifest))}
}

// Actions returns the workflow's actions: fileset-existing, fileset-landing, fileset-platform,
// fileset-manifest, fileset-limits, fileset-strategy, fileset-download and fileset-result.
func (s *Fileset) Actions() []action.Action {
	return []action.Action{existingAction{s}, landingAction{s}, platformAction{s}, manifestAction{s}, limitsAction{s},
		strategyAction{s}, downloadAction{s}, resultAction{s}}
}
