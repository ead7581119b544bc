package email

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/actiontest"
)

// nested returns a message of levels multiparts nested in one another, an attachment first.
// At 100,000 levels it is about 7 MB.
func nested(levels int) []byte {
	var b strings.Builder
	b.WriteString("Subject: deep\r\nContent-Type: multipart/mixed; boundary=b0\r\n\r\n" +
		"--b0\r\nContent-Disposition: attachment; filename=first.txt\r\n\r\nfirst\r\n")
	for i := range levels {
		fmt.Fprintf(&b, "--b%d\r\nContent-Type: multipart/mixed; boundary=b%d\r\n\r\n", i, i+1)
	}
	fmt.Fprintf(&b, "--b%d\r\nContent-Type: text/plain\r\n\r\nthe bottom\r\n", levels)
	for i := levels; i >= 0; i-- {
		fmt.Fprintf(&b, "--b%d--\r\n", i)
	}
	return []byte(b.String())
}

func childNames(rec *actiontest.Recorder) string {
	var names []string
	for _, c := range rec.Children {
		names = append(names, c.Name)
	}
	return strings.Join(names, ",")
}

// TestEmailNestingBound: a message of 100,000 nested multiparts ends with a permanent error
// naming the bound, the attachment before the nesting kept; nesting within the bound unpacks.
func TestEmailNestingBound(t *testing.T) {
	t.Parallel()
	rec := &actiontest.Recorder{}
	err := New(Config{}).Run(t.Context(), actiontest.NewTask(t, "deep.eml", "message/rfc822", nested(100_000), nil, nil), rec)
	if !action.IsPermanent(err) || !strings.Contains(err.Error(), "MIME parts nested more than 32 levels deep") {
		t.Fatalf("err = %v, want the nesting bound", err)
	}
	if got := childNames(rec); got != "deep.eml/first.txt,deep.eml/body.txt" {
		t.Fatalf("children = %q", got)
	}

	rec = &actiontest.Recorder{}
	if err := New(Config{}).Run(t.Context(), actiontest.NewTask(t, "ok.eml", "message/rfc822", nested(maxDepth-1), nil, nil), rec); err != nil {
		t.Fatal(err)
	}
	if got := childNames(rec); got != "ok.eml/first.txt,ok.eml/body.txt" || !strings.HasSuffix(string(rec.Children[1].Data), "the bottom") {
		t.Fatalf("children = %q", got)
	}
}

// cancelAfterFirst cancels the task's context once the first child is created.
type cancelAfterFirst struct {
	*actiontest.Recorder
	cancel context.CancelFunc
}

func (c cancelAfterFirst) CreateChild(ctx context.Context, ch action.Child) error {
	err := c.Recorder.CreateChild(ctx, ch)
	c.cancel()
	return err
}

// TestEmailNestingHonoursContext: canceled while walking down the nesting, the action returns
// the context's error (to be retried), not a verdict on the message.
func TestEmailNestingHonoursContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	out := cancelAfterFirst{Recorder: &actiontest.Recorder{}, cancel: cancel}
	err := New(Config{}).Run(ctx, actiontest.NewTask(t, "deep.eml", "message/rfc822", nested(100_000), nil, nil), out)
	if !errors.Is(err, context.Canceled) || action.IsPermanent(err) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if got := childNames(out.Recorder); got != "deep.eml/first.txt" {
		t.Fatalf("children = %q", got)
	}
}

// TestEmailPartBound: a message of more parts than MaxParts ends with a permanent error, the
// attachments before the bound kept.
func TestEmailPartBound(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("Subject: many\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n")
	for i := range 10 {
		fmt.Fprintf(&b, "--b\r\nContent-Disposition: attachment; filename=a%d.bin\r\n\r\n%d\r\n", i, i)
	}
	b.WriteString("--b--\r\n")
	rec := &actiontest.Recorder{}
	err := New(Config{MaxParts: 3}).Run(t.Context(), actiontest.NewTask(t, "m.eml", "message/rfc822", []byte(b.String()), nil, nil), rec)
	if !action.IsPermanent(err) || !strings.Contains(err.Error(), "more than 3 MIME parts") {
		t.Fatalf("err = %v, want the part bound", err)
	}
	if got := childNames(rec); got != "m.eml/a0.bin,m.eml/a1.bin,m.eml/a2.bin,m.eml/body.txt" {
		t.Fatalf("children = %q", got)
	}
}

// TestUniqueLinear: many duplicates of a name whose numbered forms are taken each get the next
// free number.
func TestUniqueLinear(t *testing.T) {
	t.Parallel()
	used := map[string]int{}
	for i := 2; i <= 5; i++ {
		unique(used, fmt.Sprintf("a (%d).txt", i))
	}
	var got []string
	for range 4 {
		got = append(got, unique(used, "a.txt"))
	}
	if want := "a.txt,a (6).txt,a (7).txt,a (8).txt"; strings.Join(got, ",") != want {
		t.Fatalf("names = %q, want %q", got, want)
	}
}

// FuzzEmailMIME: any message unpacks, or fails with a permanent error, without a panic and
// within the part bound.
func FuzzEmailMIME(f *testing.F) {
	f.Add([]byte(crafted))
	f.Add(nested(3))
	f.Add(nested(40))
	f.Add([]byte("Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: multipart/alternative; boundary=b\r\n\r\n--b--\r\n"))
	f.Add([]byte("Subject: x\r\n\r\nno parts"))
	f.Fuzz(func(t *testing.T, msg []byte) {
		rec := &actiontest.Recorder{}
		err := New(Config{MaxParts: 50}).Run(t.Context(), actiontest.NewTask(t, "f.eml", "message/rfc822", msg, nil, nil), rec)
		if err != nil && !action.IsPermanent(err) {
			t.Fatalf("err = %v, want nil or permanent", err)
		}
		if len(rec.Children) > 51 {
			t.Fatalf("%d children from at most 50 parts", len(rec.Children))
		}
	})
}
