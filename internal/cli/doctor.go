package cli

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/sluice-project/sluice/internal/converter"
	"github.com/sluice-project/sluice/internal/sandbox"
)

func runDoctor(ctx context.Context, e *env, args []string) error {
	fs, _ := newFlags(e, "doctor", "doctor [--output table|json]")
	out := addOutputFlag(fs)
	if _, err := parse(fs, args); err != nil {
		return err
	}
	st := converter.Doctor(ctx)
	sb := sandbox.Check()
	var fonts converter.FontStatus
	if sb.Available || sb.Mode == sandbox.Off {
		fonts = converter.Fonts(ctx)
	} else {
		fonts.Reason = "not listed: the sandbox is unavailable"
	}
	if out.json() {
		return writeJSON(e.stdout, struct {
			Tools   []converter.ToolStatus `json:"tools"`
			Sandbox sandbox.Status         `json:"sandbox"`
			Fonts   converter.FontStatus   `json:"fonts"`
		}{st, sb, fonts})
	}
	defer printFonts(e, fonts)
	defer printSandbox(e, sb)
	tw := tabwriter.NewWriter(e.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tINSTALLED\tVERSION\tPACKAGE\tWITHOUT IT")
	var missing []converter.ToolStatus
	for _, s := range st {
		inst, impact := "yes", "-"
		if !s.Installed {
			inst, impact = "NO", s.Impact
			missing = append(missing, s)
		}
		v := s.Version
		if v == "" {
			v = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Name, inst, truncate(v, 40), s.Package, impact)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(missing) == 0 {
		fmt.Fprintln(e.stdout, "\nAll converters are installed: every type of the documents workflow is handled.")
		return nil
	}
	fmt.Fprintf(e.stdout, "\n%s missing; until installed:\n", plural(len(missing), "converter"))
	seen := map[string]bool{}
	var pkgs []string
	for _, s := range missing {
		if !seen[s.Impact] {
			seen[s.Impact] = true
			fmt.Fprintf(e.stdout, "  - %s\n", s.Impact)
		}
		for _, p := range strings.Fields(s.Package) {
			if !seen["pkg:"+p] {
				seen["pkg:"+p] = true
				pkgs = append(pkgs, p)
			}
		}
	}
	fmt.Fprintf(e.stdout, "Install them with: apt-get install %s\n", strings.Join(pkgs, " "))
	return nil
}

// printSandbox says how converters run: in the sandbox, unsandboxed on purpose, or not at all.
func printSandbox(e *env, st sandbox.Status) {
	switch {
	case st.Mode == sandbox.Off:
		fmt.Fprintln(e.stdout, "\nSandbox: OFF (SLUICE_SANDBOX=off): converters run unsandboxed, with Sluice's own "+
			"access to files and the network. Use this only for documents you trust.")
	case st.Available:
		uid := fmt.Sprintf("uid %d", st.UID)
		if st.UIDs > 1 {
			uid = fmt.Sprintf("a uid of its own (%d to %d)", st.UID, st.UID+st.UIDs-1)
		}
		fmt.Fprintf(e.stdout, "\nSandbox: on (%s): each converter runs as %s with no network, no capabilities, "+
			"and only its own processes, its own directory, a private /tmp and read-only /usr in view; "+
			"CPU, memory, file-size and time limited.\n",
			st.Version, uid)
	default:
		fmt.Fprintf(e.stdout, "\nSandbox: UNAVAILABLE: %s.\nEvery conversion by an external tool fails with this reason until it is fixed "+
			"(or SLUICE_SANDBOX=off runs converters unsandboxed, for trusted documents only).\n", st.Reason)
	}
}

// printFonts says how many fonts converters see, and whether they find them through the
// system's cache.
func printFonts(e *env, st converter.FontStatus) {
	switch {
	case st.Fonts > 0 && st.Cached:
		fmt.Fprintf(e.stdout, "\nFonts: %d, found through the system's font cache.\n", st.Fonts)
	case st.Fonts > 0:
		fmt.Fprintf(e.stdout, "\nFonts: %d, but %s.\n", st.Fonts, st.Reason)
	default:
		fmt.Fprintf(e.stdout, "\nFonts: %s.\n", st.Reason)
	}
}

func truncate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
