package converter

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// FontStatus says how converters find the machine's fonts, as [Fonts] saw it.
type FontStatus struct {
	// Fonts is the number of fonts fontconfig lists to a converter.
	Fonts int `json:"fonts"`
	// Cached reports that fontconfig found them through the system's cache
	// (/var/cache/fontconfig), which the sandbox shows read-only: a converter's run does not
	// scan the fonts again.
	Cached bool `json:"cached"`
	// Reason says why Fonts is 0 or Cached is false, in plain words.
	Reason string `json:"reason,omitempty"`
}

// Fonts asks fontconfig, in a converter's sandbox and with a new HOME as every converter runs,
// which fonts it has (fc-list), and whether it had to build a cache of its own to answer: it
// does when the system's cache is missing or out of date (fonts copied in without `fc-cache`),
// and then every converter run that looks up a font scans them all again.
func Fonts(ctx context.Context) FontStatus {
	return fonts(ctx, nil)
}

// fonts is [Fonts]; a non-nil conf is written into the run's directory and given to fc-list as
// its configuration (FONTCONFIG_FILE), for tests.
func fonts(ctx context.Context, conf []byte) FontStatus {
	if !Installed("fc-list") {
		return FontStatus{Reason: "fc-list (package fontconfig) is not installed, so the fonts could not be listed"}
	}
	dir, err := os.MkdirTemp("", "sluice-fonts-")
	if err != nil {
		return FontStatus{Reason: "no temporary directory: " + err.Error()}
	}
	defer os.RemoveAll(dir)
	r := &Runner{Dir: dir, Limits: Limits{Timeout: time.Minute}}
	if conf != nil {
		if err := os.WriteFile(filepath.Join(dir, "fonts.conf"), conf, 0o644); err != nil {
			return FontStatus{Reason: err.Error()}
		}
		r.Env = []string{"FONTCONFIG_FILE=" + filepath.Join(dir, "fonts.conf")}
	}
	out, err := r.Output(ctx, "fc-list", 16<<20)
	if err != nil {
		return FontStatus{Reason: Failure("listing the fonts (fc-list)", err).Error()}
	}
	st := FontStatus{Fonts: bytes.Count(out, []byte("\n")), Cached: true}
	// A cache fontconfig built for itself lands under the HOME it was given, named like
	// "<hash>-le64.cache-<version>".
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(d.Name(), ".cache-") {
			st.Cached = false
		}
		return nil
	})
	switch {
	case st.Fonts == 0:
		st.Reason = "fontconfig lists no fonts: text in fonts a document does not embed cannot be drawn"
	case !st.Cached:
		st.Reason = "the system's font cache is missing or out of date: every converter run scans the fonts again (run fc-cache as root)"
	}
	return st
}
