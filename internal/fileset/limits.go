package fileset

import (
	"fmt"
	"math"
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
	// BundleMinFiles is the file count over which a dataset whose platform offers a
	// download-all archive is stored as that bundle (a *-fileset-bundled strategy). Defaults
	// to 20 (the design's "more than 20" files for an archive.org item); negative: never.
	BundleMinFiles int
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
	if l.BundleMinFiles == 0 {
		l.BundleMinFiles = 20
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
	total, _, overflow, err := manifestSizes(item.Manifest)
	if err != nil {
		st, msg, _ := asStatus(err)
		return st, msg
	}
	if overflow {
		return StatusTooLargeSize, fmt.Sprintf("total size is over %d bytes, over the limit of %d", int64(math.MaxInt64), l.MaxTotalSize)
	}
	if total > l.MaxTotalSize {
		return StatusTooLargeSize, fmt.Sprintf("total size %d bytes is over the limit of %d", total, l.MaxTotalSize)
	}
	if n > l.MaxFileCount {
		return StatusTooManyFiles, fmt.Sprintf("%d files is over the limit of %d", n, l.MaxFileCount)
	}
	return "", ""
}

// maxDeclaredSize bounds a declared file size: 2^53 bytes (8 PiB), the largest integer a
// manifest keeps exactly once it is JSON metadata (a float64).
const maxDeclaredSize = 1 << 53

// manifestSizes returns the total of a manifest's declared sizes and its largest, in checked
// arithmetic: overflow reports a total over math.MaxInt64 (the total is then MaxInt64). A
// negative size, or one over maxDeclaredSize, is a platform-error: a negative one added to the others it would hide them from the size
// limit (50,000,000 and -49,999,000 bytes total 1,000).
func manifestSizes(m []ManifestFile) (total, largest int64, overflow bool, err error) {
	for _, f := range m {
		if f.Size == nil {
			continue
		}
		n := *f.Size
		if n < 0 {
			return 0, 0, false, failWith(StatusPlatformError, "manifest file %q has a negative size (%d bytes)", f.Path, n)
		}
		if n > maxDeclaredSize {
			return 0, 0, false, failWith(StatusPlatformError, "manifest file %q has a size of %d bytes, more than any file can have (8 PiB)", f.Path, n)
		}
		largest = max(largest, n)
		if total > math.MaxInt64-n {
			total, overflow = math.MaxInt64, true
			continue
		}
		if !overflow {
			total += n
		}
	}
	return total, largest, overflow, nil
}

// bundleHeaderBytes is the room a bundle's file has for its headers in the archive, a local
// header and a directory record: their fixed 76 bytes, the name twice, extra fields and a comment.
const bundleHeaderBytes = 1 << 10

// bundleBudget is what a dataset's bundle may download: its files' declared sizes, with room
// for the archive's headers (bundleHeaderBytes per file and 64 KiB), within maxTotal.
func bundleBudget(m []ManifestFile, maxTotal int64) int64 {
	for _, f := range m {
		if f.Size == nil {
			return maxTotal
		}
	}
	total, _, _, _ := manifestSizes(m)
	return min(maxTotal, total+int64(len(m))*bundleHeaderBytes+64<<10)
}

// unsizedBudget is what each file of the manifest without a declared size may download: an
// equal share of what the declared sizes leave of maxTotal, so the request as a whole stays
// within it. It is meaningful once the manifest passed check.
func unsizedBudget(m []ManifestFile, maxTotal int64) int64 {
	total, _, _, _ := manifestSizes(m)
	unsized := int64(0)
	for _, f := range m {
		if f.Size == nil {
			unsized++
		}
	}
	if unsized == 0 || total >= maxTotal {
		return 0
	}
	return (maxTotal - total) / unsized
}

// Thresholds of the strategy choice (Sandcrawler's code, not its proposal's prose).
const (
	webMaxFileSize  = 64 << 20
	webMaxTotalSize = 128 << 30
)

// ChooseStrategy picks the strategy for a dataset under the default limits ([Limits.Strategy]).
func ChooseStrategy(item *PlatformItem) string { return DefaultLimits().Strategy(item) }

// Strategy picks the strategy for a dataset: over BundleMinFiles files on a platform that
// offers a download-all archive, that bundle — web-fileset-bundled when its files total under
// 64 MiB (one file stored in wayback, as web-file), else archiveorg-fileset-bundled. Otherwise:
// a single file under 64 MiB is web-file, a larger one archiveorg-file; several files each under
// 64 MiB and 128 GiB in all are web-fileset, otherwise archiveorg-fileset. archive.org items are
// always archiveorg-*.
func (l Limits) Strategy(item *PlatformItem) string {
	total, largest, _, _ := manifestSizes(item.Manifest) // check refused negative sizes
	one := len(item.Manifest) == 1
	switch {
	case item.WebBundleURL != "" && l.BundleMinFiles > 0 && len(item.Manifest) > l.BundleMinFiles && total < webMaxFileSize:
		return StrategyWebFilesetBundled
	case item.WebBundleURL != "" && l.BundleMinFiles > 0 && len(item.Manifest) > l.BundleMinFiles:
		return StrategyArchiveorgFilesetBundled
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
