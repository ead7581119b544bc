package converter

import (
	"os"
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/sandbox"
)

// TestFonts: in a converter's sandbox fontconfig lists the machine's fonts through the system's
// cache and builds none of its own; given a font directory no cache covers, it builds one, and
// Fonts says so — the case of fonts copied in without fc-cache.
func TestFonts(t *testing.T) {
	if !Installed("fc-list") || !sandbox.Check().Available {
		if os.Getenv("SLUICE_TEST_REQUIRE_TOOLS") == "1" {
			t.Fatal("fc-list (fontconfig) or the sandbox is unavailable")
		}
		t.Skip("fc-list (fontconfig) or the sandbox is unavailable")
	}
	st := Fonts(t.Context())
	if st.Fonts == 0 || !st.Cached || st.Reason != "" {
		t.Errorf("the machine's fonts: %+v; want fonts, found through the system's cache", st)
	}
	// A configuration naming a font directory with its cache in the run's HOME, where no cache
	// is yet: fontconfig scans the directory and writes one.
	conf := `<?xml version="1.0"?><!DOCTYPE fontconfig SYSTEM "urn:fontconfig:fonts.dtd">
<fontconfig><dir>/usr/share/fonts</dir><cachedir>~/.cache/sluice-test-fonts</cachedir></fontconfig>`
	st = fonts(t.Context(), []byte(conf))
	if st.Fonts == 0 || st.Cached || !strings.Contains(st.Reason, "font cache is missing or out of date") {
		t.Errorf("fonts with no cache: %+v; want fonts, not cached, and the reason", st)
	}
}
