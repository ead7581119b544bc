package objects_test

import (
	"flag"
	"fmt"

	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/converter"
	"github.com/sluice-project/sluice/internal/converter/convertertest"
	"github.com/sluice-project/sluice/internal/objects"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/drivertest"
)

var benchRows = flag.Int("objects.rows", 20, "rows of BenchmarkSheet's sheet (docs/objects.md measures 1,000)")

// cpu returns the CPU time of the process (RUSAGE_SELF). The tools' own is not measured:
// they run under bubblewrap, whose sandboxed children the kernel does not count as ours.
func cpu(who int) time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(who, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSheet ingests a sheet of -objects.rows access images (small PNGs: digests, EXIF,
// preservation copy, transcription, pyramid TIFF and thumbnail — 9 actions each) and, as the
// baseline in the same run, runs the same tools (exiftool, vips tiffsave, vipsthumbnail) on
// the same files directly, one file after another. It reports file sets per second, Sluice's
// own CPU per action (the process's: the engine, SQLite, the actions' Go code; the tools
// excluded), and the pipeline's wall time per file set over the tools' alone.
func BenchmarkSheet(b *testing.B) {
	convertertest.RequireTools(b, "vips", "vipsthumbnail", "exiftool")
	rows := *benchRows
	dir := b.TempDir()
	var sheet strings.Builder
	sheet.WriteString(strings.Join(objects.Headers, ",") + "\n")
	for i := range rows {
		pngFile(b, filepath.Join(dir, fmt.Sprintf("b%04d.png", i)), i)
		fmt.Fprintf(&sheet, "IMAGE,bw%04d,bf%04d,b%04d.png,a description,A,a label,,\n", i/4, i, i)
	}
	// The baseline: the tools alone, on the first files.
	n := min(rows, 20)
	r := &converter.Runner{Dir: b.TempDir()}
	toolsWall := time.Now()
	for i := range n {
		src, err := r.Stage(filepath.Join(dir, fmt.Sprintf("b%04d.png", i)))
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range [][]string{{"exiftool", "-json", "-n", src}, {"vips", "tiffsave", src, filepath.Join(r.Dir, fmt.Sprint(i, ".tif")),
			"--tile", "--pyramid", "--compression", "jpeg", "--Q", "90", "--tile-width", "256", "--tile-height", "256"},
			{"vipsthumbnail", src, "--size", "300x300", "-o", filepath.Join(r.Dir, fmt.Sprint(i, ".jpg[Q=85,strip]"))}} {
			if _, err := r.Output(b.Context(), c[0], 1<<20, c[1:]...); err != nil {
				b.Fatal(err)
			}
		}
	}
	perFileTools := time.Since(toolsWall) / time.Duration(n)
	for _, drv := range []struct {
		name string
		open func(testing.TB) store.Store
	}{{"sqlite", drivertest.OpenSQLite}, {"postgres", drivertest.OpenPostgres}} {
		b.Run(drv.name, func(b *testing.B) {
			kit := startObjects(b, drv.open)
			var wall, self time.Duration
			sheets := 0
			for b.Loop() {
				// Each iteration's accessions are new: they are unique in the installation.
				csv := strings.NewReplacer(",bw", fmt.Sprintf(",i%dw", sheets), ",bf", fmt.Sprintf(",i%df", sheets)).Replace(sheet.String())
				id, err := objects.Upload(b.Context(), kit.Engine, kit.Blobs, objects.UploadParams{Name: "bench.csv", CSV: strings.NewReader(csv), FilesDir: dir})
				if err != nil {
					b.Fatal(err)
				}
				waitSheet(b, kit, id, objects.StatusAwaitingApproval)
				start, s0 := time.Now(), cpu(syscall.RUSAGE_SELF)
				if err := objects.Approve(b.Context(), kit.Engine, id); err != nil {
					b.Fatal(err)
				}
				if s := waitSheetFor(b, kit, id, time.Hour, objects.StatusCompleted, objects.StatusCompletedError); s.Status != objects.StatusCompleted {
					b.Fatalf("sheet %s", s.Status)
				}
				wall, self = wall+time.Since(start), self+cpu(syscall.RUSAGE_SELF)-s0
				sheets++
			}
			fileSets := float64(rows * sheets)
			b.ReportMetric(fileSets/wall.Seconds(), "filesets/s")
			b.ReportMetric(float64(self.Microseconds())/1000/(fileSets*9), "sluice-cpu-ms/action")
			b.ReportMetric(wall.Seconds()/fileSets/perFileTools.Seconds(), "wall/baseline")
		})
	}
}
