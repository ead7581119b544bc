package worker

import (
	"testing"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/workflow"
)

// TestCacheKeyOptions: the conversion cache keys on the item's options as written. The same
// options in another key order are one conversion; two 20-digit options that float64 rounds to
// one value (12345678901234567890 and …891 both become 12345678901234567000) are two, and so
// are 1.50 and 1.51.
func TestCacheKeyOptions(t *testing.T) {
	t.Parallel()
	spec, step := action.Spec{Name: "convert"}, &workflow.Step{}
	key := func(opts string) string {
		return cacheKey(spec, step, &record.Item{Options: []byte(opts), BlobSHA256: "ab", ContentType: "application/pdf"})
	}
	if a, b := key(`{"lang":"en","ocr":true}`), key(`{"ocr":true, "lang":"en"}`); a != b {
		t.Errorf("the same options in another order have two keys: %s, %s", a, b)
	}
	for _, pair := range [][2]string{
		{`{"id":12345678901234567890}`, `{"id":12345678901234567891}`},
		{`{"dpi":1.50}`, `{"dpi":1.51}`},
	} {
		if key(pair[0]) == key(pair[1]) {
			t.Errorf("options %s and %s share a cache key", pair[0], pair[1])
		}
	}
}
