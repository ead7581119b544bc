package cli

import (
	"flag"
	"io"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/api"
)

func TestByteSize(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		want int64
	}{
		{"1048576", 1 << 20}, {"10GiB", 10 << 30}, {"512MiB", 512 << 20}, {"64KiB", 64 << 10}, {"2gb", 2 << 30}, {"3 T", 3 << 40}, {"7B", 7},
		{"", -1}, {"0", -1}, {"-1MiB", -1}, {"ten", -1}, {"9999999TiB", -1},
	} {
		var b byteSize
		err := b.Set(tt.in)
		if (err != nil) != (tt.want < 0) || err == nil && int64(b) != tt.want {
			t.Errorf("Set(%q) = %d, %v; want %d", tt.in, b, err, tt.want)
		}
	}
	// String writes what Set reads back, in the largest unit that divides the size.
	for n, want := range map[int64]string{10 << 30: "10GiB", 64 << 30: "64GiB", 1536 << 20: "1536MiB", 3 << 40: "3TiB", 1025: "1025", 0: "0"} {
		b := byteSize(n)
		var back byteSize
		if got := b.String(); got != want {
			t.Errorf("byteSize(%d).String() = %q, want %q", n, got, want)
		} else if n > 0 && (back.Set(got) != nil || back != b) {
			t.Errorf("Set(%q) = %d, want %d", got, back, n)
		}
	}
}

func TestLimitFlags(t *testing.T) {
	t.Parallel()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	l := limitFlags(fs)
	if got := l.get(); got.MaxUploadBytes != api.DefaultMaxUploadBytes || got.MaxParts != api.DefaultMaxParts || got.BodyReadTimeout != api.DefaultBodyReadTimeout {
		t.Errorf("defaults: %+v", got)
	}
	if err := fs.Parse([]string{"--max-upload-bytes", "1GiB", "--max-parts", "5", "--max-roots", "7", "--body-read-timeout", "5s",
		"--read-header-timeout", "2s", "--idle-timeout", "90s"}); err != nil {
		t.Fatal(err)
	}
	want := api.Limits{MaxUploadBytes: 1 << 30, MaxParts: 5, MaxRoots: 7, BodyReadTimeout: 5 * time.Second, ReadHeaderTimeout: 2 * time.Second, IdleTimeout: 90 * time.Second}
	if got := l.get(); got != want {
		t.Errorf("flags: %+v, want %+v", got, want)
	}
}
