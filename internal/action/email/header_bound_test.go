package email

import (
	"bytes"
	"context"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/actiontest"
)

// repeat is an endless reader of its pattern.
type repeat struct {
	pattern []byte
	off     int
}

func (r *repeat) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = r.pattern[r.off]
		r.off = (r.off + 1) % len(r.pattern)
	}
	return len(p), nil
}

// streamTask returns a task for the message of the readers' bytes in turn, generated as it is
// read rather than held in memory, and the count of bytes read from it.
func streamTask(t *testing.T, name string, size int64, parts func() []io.Reader) (*action.Task, *countingReader) {
	task := actiontest.NewTask(t, name, "message/rfc822", nil, nil, nil)
	task.Item.Size = size
	read := &countingReader{}
	task.OpenBlob = func(context.Context) (io.ReadCloser, error) {
		read.r = io.MultiReader(parts()...)
		return io.NopCloser(read), nil
	}
	return task, read
}

// TestEmailPartHeaderBound: a part whose header is 64 MiB — one long line or many short
// fields, in the top multipart or a nested one — ends the message with a permanent error
// naming the bound; the parts before it are kept, none after it; the message is read no further
// than about the bound; and reading it allocates a fraction of the header, however large.
// Not parallel: it measures the process's allocation.
func TestEmailPartHeaderBound(t *testing.T) {
	const headerSize = 64 << 20
	const before = "Subject: big\r\nContent-Type: multipart/mixed; boundary=b0\r\n\r\n" +
		"--b0\r\nContent-Type: text/plain\r\n\r\nhello\r\n" +
		"--b0\r\nContent-Disposition: attachment; filename=first.txt\r\n\r\nfirst\r\n"
	const after = "\r\n\r\nbig part's body\r\n" +
		"--b1\r\nContent-Disposition: attachment; filename=after.txt\r\n\r\nafter\r\n--b1--\r\n" +
		"--b0\r\nContent-Disposition: attachment; filename=last.txt\r\n\r\nlast\r\n--b0--\r\n"
	for _, tc := range []struct {
		name    string
		open    string // from the last boundary before the big header to the header's padding
		pattern string
	}{
		{
			name:    "one long line",
			open:    "--b0\r\nContent-Type: multipart/mixed; boundary=b1\r\n\r\n--b1\r\nX-Long: ",
			pattern: "aaaaaaaaaaaaaaaa",
		},
		{
			name:    "many fields",
			open:    "--b0\r\nContent-Type: multipart/mixed; boundary=b1\r\n\r\n--b1\r\n",
			pattern: "X-Pad: aaaaaaaaaaaaaaaaaaaaaaaa\r\n",
		},
		{
			name:    "folded lines",
			open:    "--b0\r\nContent-Type: multipart/mixed; boundary=b1\r\n\r\n--b1\r\nX-Folded: a",
			pattern: "\r\n aaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		},
		{
			name:    "top multipart",
			open:    "--b0\r\nX-Long: ",
			pattern: "aaaaaaaaaaaaaaaa",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			size := int64(len(before) + len(tc.open) + headerSize + len(after))
			task, read := streamTask(t, "big.eml", size, func() []io.Reader {
				return []io.Reader{
					strings.NewReader(before + tc.open),
					io.LimitReader(&repeat{pattern: []byte(tc.pattern)}, headerSize),
					strings.NewReader(after),
				}
			})
			rec := &actiontest.Recorder{}
			runtime.GC()
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			err := New(Config{}).Run(t.Context(), task, rec)
			runtime.ReadMemStats(&m1)
			alloc := m1.TotalAlloc - m0.TotalAlloc
			t.Logf("allocated %d KiB reading a %d MiB part header", alloc>>10, headerSize>>20)
			want := "message has a MIME part whose header is larger than 1 MiB (the limit); the parts before it were kept"
			if !action.IsPermanent(err) || err == nil || err.Error() != want {
				t.Fatalf("err = %v, want %q", err, want)
			}
			if got := childNames(rec); got != "big.eml/first.txt,big.eml/body.txt" {
				t.Fatalf("children = %q", got)
			}
			if body := rec.Children[1].Data; !bytes.HasSuffix(body, []byte("hello")) {
				t.Fatalf("body = %q, want the text part before the big header", body)
			}
			if limit := int64(len(before)+len(tc.open)) + 2*maxHeader; read.n > limit {
				t.Fatalf("read %d bytes of the message, want at most %d", read.n, limit)
			}
			// Unbounded, go-message held the whole header several times over (440 MiB to 1 GiB
			// allocated for these 64 MiB). Bounded, many short fields cost the most: about
			// 16 MiB, go-message's ReadHeader keeping 256 bytes or more a field.
			if alloc > 24<<20 {
				t.Fatalf("allocated %d MiB reading a %d MiB part header, want under 24 MiB", alloc>>20, headerSize>>20)
			}
		})
	}
}

// TestEmailPartHeaderWithinBound: what the bound does not count is read as before — a part
// header of 512 KiB, a preamble, a body of one 4 MiB line and an epilogue of 4 MiB after a
// nested multipart's end — and every part is kept.
func TestEmailPartHeaderWithinBound(t *testing.T) {
	t.Parallel()
	line := strings.Repeat("x", 4<<20)
	msg := "Subject: fits\r\nContent-Type: multipart/mixed; boundary=b0\r\n\r\n" +
		"This is a multi-part message in MIME format.\r\n" +
		"--b0\r\nContent-Type: multipart/mixed; boundary=b1\r\n\r\npreamble\r\n" +
		"--b1\r\nContent-Disposition: attachment; filename=padded.txt\r\n" +
		strings.Repeat("X-Pad: "+strings.Repeat("p", 57)+"\r\n", 8192) + // 512 KiB
		"\r\npadded\r\n" +
		"--b1\r\nContent-Type: application/octet-stream; name=line.bin\r\n" +
		"Content-Disposition: attachment; filename=line.bin\r\n\r\n" + line + "\r\n" +
		"--b1--\r\n" + line + "\r\n" + // the epilogue
		"--b0\r\nContent-Disposition: attachment; filename=last.txt\r\n\r\nlast\r\n--b0--\r\n"
	rec := &actiontest.Recorder{}
	if err := New(Config{}).Run(t.Context(), actiontest.NewTask(t, "ok.eml", "message/rfc822", []byte(msg), nil, nil), rec); err != nil {
		t.Fatal(err)
	}
	if got := childNames(rec); got != "ok.eml/padded.txt,ok.eml/line.bin,ok.eml/last.txt,ok.eml/body.txt" {
		t.Fatalf("children = %q", got)
	}
	if string(rec.Children[0].Data) != "padded" || string(rec.Children[1].Data) != line || string(rec.Children[2].Data) != "last" {
		t.Fatalf("attachments' contents differ")
	}
}

// TestEmailTopHeaderBound: a message whose own header is 64 MiB gets a permanent error in plain
// words naming the bound (not go-message's text), having read no more than about the bound.
func TestEmailTopHeaderBound(t *testing.T) {
	t.Parallel()
	const headerSize = 64 << 20
	task, read := streamTask(t, "top.eml", headerSize, func() []io.Reader {
		return []io.Reader{
			strings.NewReader("Subject: big\r\nX-Long: "),
			io.LimitReader(&repeat{pattern: []byte("aaaaaaaaaaaaaaaa")}, headerSize),
			strings.NewReader("\r\n\r\nbody\r\n"),
		}
	})
	rec := &actiontest.Recorder{}
	err := New(Config{}).Run(t.Context(), task, rec)
	if want := "message's header is larger than 1 MiB (the limit)"; !action.IsPermanent(err) || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
	if len(rec.Children) != 0 {
		t.Fatalf("children = %q, want none", childNames(rec))
	}
	if read.n > 2*maxHeader {
		t.Fatalf("read %d bytes of the message, want at most %d", read.n, 2*maxHeader)
	}
}
