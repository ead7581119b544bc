package sandbox_test

import (
	"testing"

	"github.com/sluice-project/sluice/internal/sandbox"
	"github.com/sluice-project/sluice/internal/subprocess"
)

// BenchmarkRun measures what the sandbox adds to one run of a tool that does nothing (a
// converter's run is tens of milliseconds to seconds): sandboxed against unsandboxed, same run.
func BenchmarkRun(b *testing.B) {
	for _, m := range []sandbox.Mode{sandbox.Off, sandbox.On} {
		b.Run("sandbox="+string(m), func(b *testing.B) {
			old := sandbox.SetMode(m)
			defer sandbox.SetMode(old)
			dir := b.TempDir()
			for b.Loop() {
				if err := subprocess.Run(b.Context(), subprocess.Cmd{Path: "/bin/true", Dir: dir, Sandbox: &sandbox.Spec{}}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
