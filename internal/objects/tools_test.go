package objects_test

import (
	"encoding/json"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/action/basic"
	"github.com/sluice-project/sluice/internal/builtin"
	"github.com/sluice-project/sluice/internal/converter/convertertest"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/objects"
	"github.com/sluice-project/sluice/internal/store/drivertest"
)

// TestExifNumbersExact: exiftool's numbers are the file set's exif as it printed them — a PNG
// whose Title is "1.50" comes back 1.50 (exiftool -json prints such a value as a number), not
// 1.5; its 20-digit Comment, which exiftool prints as a string, stays one.
func TestExifNumbersExact(t *testing.T) {
	t.Parallel()
	convertertest.RequireTools(t, "exiftool")
	dir := t.TempDir()
	pngFile(t, filepath.Join(dir, "a.png"), 1)
	withText(t, filepath.Join(dir, "a.png"), map[string]string{"Title": "1.50", "Comment": "12345678901234567890"})
	kit := enginetest.StartWith(t, drivertest.OpenSQLite, enginetest.Config{Domains: map[string]engine.Domain{objects.Name: objects.Domain{}}},
		append((&objects.Service{}).Actions(), basic.NewPass())...)
	raw, _ := builtin.Source(objects.Name)
	if _, _, err := kit.Engine.ApplyWorkflow(t.Context(), raw, "objects.yaml"); err != nil {
		t.Fatal(err)
	}
	sid, err := objects.Upload(t.Context(), kit.Engine, kit.Blobs, objects.UploadParams{Name: "exif.csv", FilesDir: dir,
		CSV:           strings.NewReader(strings.Join(objects.Headers, ",") + "\nIMAGE,w-exif,f-exif,a.png,a river,A,river,true,\n"),
		CustomActions: []string{"ExtractExifMetadata"}})
	if err != nil {
		t.Fatal(err)
	}
	waitSheet(t, kit, sid, objects.StatusAwaitingApproval)
	if err := objects.Approve(t.Context(), kit.Engine, sid); err != nil {
		t.Fatal(err)
	}
	waitSheet(t, kit, sid, objects.StatusCompleted, objects.StatusCompletedError)
	f, err := objects.NewStore(kit.Store.DomainSQL()).GetFileSet(t.Context(), objects.FileSetID("f-exif"))
	if err != nil {
		t.Fatal(err)
	}
	exif, _ := f.Core["exif"].(map[string]any)
	if exif["Title"] != json.Number("1.50") || exif["Comment"] != "12345678901234567890" {
		b, _ := json.Marshal(f.Core["exif"])
		t.Errorf("exif %s (Title %#v, Comment %#v); want Title 1.50 and Comment \"12345678901234567890\" as exiftool printed them", b, exif["Title"], exif["Comment"])
	}
}

// withText adds tEXt chunks (keyword, text) to the PNG at path, after its header.
func withText(t *testing.T, path string, text map[string]string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const ihdrEnd = 8 + 8 + 13 + 4 // signature, then IHDR's length, type, data and CRC
	out := append([]byte(nil), b[:ihdrEnd]...)
	for k, v := range text {
		data := append([]byte(k+"\x00"), v...)
		chunk := append([]byte("tEXt"), data...)
		n := len(data)
		out = append(out, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
		out = append(out, chunk...)
		c := crc32.ChecksumIEEE(chunk)
		out = append(out, byte(c>>24), byte(c>>16), byte(c>>8), byte(c))
	}
	out = append(out, b[ihdrEnd:]...)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}
