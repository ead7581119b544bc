package fileset

import (
	"fmt"
	"strings"
)

// Limits bound what a request may download. The zero value is Sandcrawler's defaults.
type Limits struct {
	// MaxTotalSize bounds a dataset's total size: over it, too-large-size. Defaults to 64 GiB.
	MaxTotalSize int64
	// MaxFileCount bounds a dataset's file count: over it, too-many-files. Defaults to 200.
	MaxFileCount int
	// MaxManifest is the manifest length over which it is cut to MaxFileCount entries (kept in
	// the result, not downloaded). Defaults to 10,000.
	MaxManifest int
}

// DefaultLimits returns the limits a zero [Limits] stands for.
func DefaultLimits() Limits { return Limits{}.withDefaults() }

func (l Limits) withDefaults() Limits {
	if l.MaxTotalSize <= 0 {
		l.MaxTotalSize = 64 << 30
	}
	if l.MaxFileCount <= 0 {
		l.MaxFileCount = 200
	}
	if l.MaxManifest <= 0 {
		l.MaxManifest = 10000
	}
	return l
}

// truncate cuts an over-long manifest, recording its length.
func (l Limits) truncate(item *PlatformItem) {
	if len(item.Manifest) > l.MaxManifest {
		item.ManifestTruncated = len(item.Manifest)
		item.Manifest = item.Manifest[:l.MaxFileCount]
	}
}

// check returns the limit status a manifest breaks ("" when none), with its reason.
func (l Limits) check(item *PlatformItem) (string, string) {
	n := len(item.Manifest)
	if item.ManifestTruncated > 0 {
		n = item.ManifestTruncated
	}
	if n == 0 {
		return StatusEmptyManifest, "the platform lists no files"
	}
	var total int64
	for _, f := range item.Manifest {
		if f.Size != nil {
			total += *f.Size
		}
	}
	if total > l.MaxTotalSize {
		return StatusTooLargeSize, fmt.Sprintf("total size %d bytes is over the limit of %d", total, l.MaxTotalSize)
	}
	if n > l.MaxFileCount {
		return StatusTooManyFiles, fmt.Sprintf("%d files is over the limit of %d", n, l.MaxFileCount)
	}
	return "", ""
}

// Thresholds of the strategy choice (Sandcrawler's code, not its proposal's prose).
const (
	webMaxFileSize  = 64 << 20
	webMaxTotalSize = 128 << 30
)

// ChooseStrategy picks the strategy for a dataset: a single file under 64 MiB is web-file, a
// larger one archiveorg-file; several files each under 64 MiB and 128 GiB in all are
// web-fileset, otherwise archiveorg-fileset. archive.org items are always archiveorg-*.
func ChooseStrategy(item *PlatformItem) string {
	var total, largest int64
	for _, f := range item.Manifest {
		if f.Size != nil {
			total += *f.Size
			largest = max(largest, *f.Size)
		}
	}
	one := len(item.Manifest) == 1
	switch {
	case item.PlatformName == "archiveorg" && one:
		return StrategyArchiveorgFile
	case item.PlatformName == "archiveorg":
		return StrategyArchiveorgFileset
	case one && largest < webMaxFileSize:
		return StrategyWebFile
	case one:
		return StrategyArchiveorgFile
	case largest < webMaxFileSize && total < webMaxTotalSize:
		return StrategyWebFileset
	default:
		return StrategyArchiveorgFileset
	}
}

// SafePath reports whether a manifest path may name a file: relative, no .. segment, no NUL,
// no backslash, not empty.
func SafePath(p string) bool {
	if p == "" || strings.ContainsAny(p, "\x00\\") || strings.HasPrefix(p, "/") {
		return false
	}
	for _, s := range strings.Split(p, "/") {
		if s == ".." || s == "." {
			return false
		}
	}
	return true
}
