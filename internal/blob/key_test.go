package blob_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/blob"
)

// FuzzKey checks that no name reaches the file system unless it is a valid
// blob name: anything Dir accepts must be 64 lowercase hex characters.
func FuzzKey(f *testing.F) {
	for _, s := range []string{"../../etc/passwd", strings.Repeat("a", 64), strings.Repeat("A", 64), "", "/" + strings.Repeat("0", 63)} {
		f.Add(s)
	}
	d, err := blob.NewDir(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { d.Close() })
	f.Fuzz(func(t *testing.T, key string) {
		_, err := d.Stat(t.Context(), key)
		valid := len(key) == 64 && strings.Trim(key, "0123456789abcdef") == ""
		if valid != !errors.Is(err, blob.ErrInvalidKey) {
			t.Fatalf("Stat(%q) = %v; valid key: %v", key, err, valid)
		}
		if valid && !errors.Is(err, blob.ErrNotFound) {
			t.Fatalf("Stat(%q) of valid absent key = %v, want ErrNotFound", key, err)
		}
	})
}
