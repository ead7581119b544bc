package email

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/actiontest"
	"github.com/sluice-project/sluice/internal/action/detect"
	"github.com/sluice-project/sluice/internal/action/unpack"
)

// corpusDir returns the shared test corpus, skipping the test only when it is absent.
func corpusDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join("..", "..", "..", "..", "shared", "corpus", "files")
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		t.Skipf("corpus %s not present", dir)
	}
	return dir
}

func needMsgconvert(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("msgconvert"); err != nil {
		msg := "msgconvert not installed (apt-get install libemail-outlook-message-perl libemail-address-perl)"
		if os.Getenv("SLUICE_TEST_REQUIRE_TOOLS") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
}

type leaf struct {
	name string
	data []byte
}

// walk routes an item the way the documents workflow does, unpacking emails and archives, and
// collects the leaves and errors.
func walk(t testing.TB, name, contentType string, data []byte, leaves *[]leaf, errs *[]string) {
	t.Helper()
	rec := &actiontest.Recorder{}
	task := actiontest.NewTask(t, name, contentType, data, nil, nil)
	if err := detect.New(detect.Config{}).Run(t.Context(), task, rec); err != nil {
		*errs = append(*errs, name+": "+err.Error())
		return
	}
	var a action.Action
	switch rec.Events[0] {
	case "detected.email":
		a = New(Config{})
	case "detected.archive":
		a = unpack.New(unpack.Config{})
	default:
		*leaves = append(*leaves, leaf{name, data})
		return
	}
	task.Item.ContentType = rec.ContentType
	rec = &actiontest.Recorder{}
	if err := a.Run(t.Context(), task, rec); err != nil {
		*errs = append(*errs, name+": "+err.Error())
	}
	for _, c := range rec.Children {
		walk(t, c.Name, c.ContentType, c.Data, leaves, errs)
	}
}

func TestEmailCorpus(t *testing.T) {
	t.Parallel()
	dir := corpusDir(t)
	b, err := os.ReadFile(filepath.Join(dir, "..", "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var expected []struct {
		File         string   `json:"file"`
		MinDocuments int      `json:"min_documents"`
		Phrases      []string `json:"phrases"`
	}
	if err := json.Unmarshal(b, &expected); err != nil {
		t.Fatal(err)
	}
	wantLeaves := map[string][]string{
		"testRFC822_normal_zip": {"testRFC822_normal_zip/test.zip/text.txt", "testRFC822_normal_zip/body.txt"},
		"testMSG_att_msg.msg": {"testMSG_att_msg.msg/Test Attachment/body.txt",
			"testMSG_att_msg.msg/smbprn.00009008.KdcPjl.pdf", "testMSG_att_msg.msg/body.txt"},
		"complex.mbox": {"complex.mbox/message-00001.eml/body.txt", "complex.mbox/message-00002.eml/body.txt",
			"complex.mbox/message-00003.eml/body.txt"},
	}
	for _, e := range expected {
		want, ok := wantLeaves[e.File]
		if !ok {
			continue
		}
		t.Run(e.File, func(t *testing.T) {
			t.Parallel()
			if strings.HasSuffix(e.File, ".msg") {
				needMsgconvert(t)
			}
			data, err := os.ReadFile(filepath.Join(dir, e.File))
			if err != nil {
				t.Fatal(err)
			}
			var leaves []leaf
			var errs []string
			walk(t, e.File, "", data, &leaves, &errs)
			if len(errs) > 0 {
				t.Errorf("errors: %q", errs)
			}
			var names []string
			for _, l := range leaves {
				names = append(names, l.name)
			}
			if strings.Join(names, "\n") != strings.Join(want, "\n") {
				t.Errorf("leaves = %q, want %q", names, want)
			}
			if len(leaves) < e.MinDocuments {
				t.Errorf("%d leaves, want at least %d", len(leaves), e.MinDocuments)
			}
			for _, p := range e.Phrases {
				found := false
				for _, l := range leaves {
					found = found || bytes.Contains(bytes.Join(bytes.Fields(l.data), []byte(" ")), []byte(p))
				}
				if !found {
					t.Errorf("phrase %q in no leaf", p)
				}
			}
		})
	}
}

func TestEmailMsgMetadata(t *testing.T) {
	t.Parallel()
	needMsgconvert(t)
	rec := &actiontest.Recorder{}
	task := actiontest.NewFileTask(t, filepath.Join(corpusDir(t), "testMSG_att_msg.msg"), "application/vnd.ms-outlook", nil, nil)
	task.Item.Metadata = map[string]any{"email_subject": "set by the user"}
	if err := New(Config{}).Run(t.Context(), task, rec); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"email_from": "Nick Booth <nick.booth@pof.com.au>", "email_to": "Nick Booth <nick.booth@pof.com.au>",
		"email_date": "2010-06-17T23:54:19Z", "email_message_id": "3975CB0784A2C249A2EDDD4D43C53D08045B971A87@Stitch.pof.com.au",
	}
	if !equalMaps(rec.Metadata, want) {
		t.Fatalf("metadata = %v, want %v", rec.Metadata, want)
	}
	for _, c := range rec.Children {
		if !equalMaps(c.Metadata, want) {
			t.Fatalf("child %s metadata = %v", c.Name, c.Metadata)
		}
	}
}

// TestEmailMsgDeterministic: the same .msg converted twice gives the same children, byte for
// byte. msgconvert makes MIME boundaries and Content-IDs of the time, random numbers and its pid,
// so the embedded message of testMSG_att_msg.msg differed on every run, and the corpus crash
// loop found a replay after a kill failing the item as a nondeterministic action.
func TestEmailMsgDeterministic(t *testing.T) {
	t.Parallel()
	needMsgconvert(t)
	path := filepath.Join(corpusDir(t), "testMSG_att_msg.msg")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	var runs [2][]actiontest.RecordedChild
	for i := range runs {
		rec := &actiontest.Recorder{}
		task := actiontest.NewFileTask(t, path, "application/vnd.ms-outlook", nil, nil)
		task.Item.BlobSHA256 = hex.EncodeToString(sum[:])
		if err := New(Config{}).Run(t.Context(), task, rec); err != nil {
			t.Fatal(err)
		}
		runs[i] = rec.Children
	}
	if len(runs[0]) != len(runs[1]) || len(runs[0]) < 2 {
		t.Fatalf("children: %d, then %d; want the same, at least 2 (the body and the attached message)", len(runs[0]), len(runs[1]))
	}
	embedded := false
	for i, c := range runs[0] {
		d := runs[1][i]
		if c.Name != d.Name || !bytes.Equal(c.Data, d.Data) {
			t.Errorf("child %d: %s (%d bytes, sha256 %x), then %s (%d bytes, sha256 %x)", i,
				c.Name, len(c.Data), sha256.Sum256(c.Data), d.Name, len(d.Data), sha256.Sum256(d.Data))
		}
		if c.ContentType == "message/rfc822" {
			embedded = true
			if !bytes.Contains(c.Data, []byte("boundary=")) {
				t.Errorf("embedded message %s has no MIME boundary: the test no longer covers generated boundaries", c.Name)
			}
		}
	}
	if !embedded {
		t.Error("no embedded message among the children")
	}
}

func equalMaps(a, b map[string]any) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestEmailMsgconvertMissing(t *testing.T) {
	t.Parallel()
	task := actiontest.NewTask(t, "a.msg", "application/vnd.ms-outlook", []byte("\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"), nil, nil)
	err := New(Config{MsgConvert: "/nonexistent/msgconvert"}).Run(t.Context(), task, &actiontest.Recorder{})
	if !action.IsPermanent(err) || err.Error() != "email conversion of .msg needs msgconvert: apt-get install libemail-outlook-message-perl" {
		t.Fatalf("err = %v", err)
	}
}

func TestEmailCorruptMsg(t *testing.T) {
	t.Parallel()
	needMsgconvert(t)
	task := actiontest.NewTask(t, "a.msg", "application/vnd.ms-outlook", []byte("\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1 not really"), nil, nil)
	err := New(Config{}).Run(t.Context(), task, &actiontest.Recorder{})
	if !action.IsPermanent(err) || !strings.HasPrefix(err.Error(), "convert .msg: ") {
		t.Fatalf("err = %v", err)
	}
}

const crafted = "From: =?ISO-8859-1?Q?Andr=E9?= <andre@example.com>\r\n" +
	"To: a@example.com, \"B\" <b@example.com>\r\n" +
	"Subject: =?UTF-8?B?csOpc3Vtw6k=?=\r\n" +
	"Date: Mon, 2 Jan 2006 15:04:05 -0700\r\n" +
	"Message-ID: <id-1@example.com>\r\n" +
	"MIME-Version: 1.0\r\n" +
	"Content-Type: multipart/mixed; boundary=outer\r\n\r\n" +
	"--outer\r\n" +
	"Content-Type: multipart/alternative; boundary=alt\r\n\r\n" +
	"--alt\r\n" +
	"Content-Type: text/plain; charset=iso-8859-1\r\n" +
	"Content-Transfer-Encoding: quoted-printable\r\n\r\n" +
	"Caf=E9 cr=E8me\r\n" +
	"--alt\r\n" +
	"Content-Type: text/html; charset=windows-1252\r\n\r\n" +
	"<p>Caf\xe9 \x96 html</p>\r\n" +
	"--alt--\r\n" +
	"--outer\r\n" +
	"Content-Type: application/pdf\r\n" +
	"Content-Disposition: attachment; filename*=UTF-8''r%C3%A9sum%C3%A9.pdf\r\n" +
	"Content-Transfer-Encoding: base64\r\n\r\n" +
	"JVBERi0xLjQK\r\n" +
	"--outer\r\n" +
	"Content-Type: application/pdf\r\n" +
	"Content-Disposition: attachment; filename=\"../r\xc3\xa9sum\xc3\xa9.pdf\"\r\n\r\n" +
	"%PDF-1.4 second\r\n" +
	"--outer\r\n" +
	"Content-Type: application/octet-stream\r\n\r\n" +
	"unnamed\r\n" +
	"--outer\r\n" +
	"Content-Type: message/rfc822\r\n\r\n" +
	"Subject: inner\r\n\r\ninner body\r\n" +
	"--outer--\r\n"

func TestEmailCrafted(t *testing.T) {
	t.Parallel()
	rec := &actiontest.Recorder{}
	task := actiontest.NewTask(t, "m.eml", "message/rfc822", []byte(crafted), nil, nil)
	if err := New(Config{}).Run(t.Context(), task, rec); err != nil {
		t.Fatal(err)
	}
	type got struct{ name, ct, data string }
	var children []got
	for _, c := range rec.Children {
		children = append(children, got{c.Name, c.ContentType, string(c.Data)})
	}
	want := []got{
		{"m.eml/résumé.pdf", "", "%PDF-1.4\n"},
		{"m.eml/.._résumé.pdf", "", "%PDF-1.4 second"},
		{"m.eml/attachment-3", "", "unnamed"},
		{"m.eml/message-4.eml", "message/rfc822", "Subject: inner\r\n\r\ninner body"},
		{"m.eml/body.txt", "text/plain; charset=utf-8", "From: André <andre@example.com>\nTo: a@example.com, B <b@example.com>\n" +
			"Subject: résumé\nDate: Mon, 2 Jan 2006 15:04:05 -0700\n\nCafé crème"},
	}
	if len(children) != len(want) {
		t.Fatalf("children = %q", children)
	}
	for i := range want {
		if children[i] != want[i] {
			t.Errorf("child %d = %q, want %q", i, children[i], want[i])
		}
	}
	wantMD := map[string]any{"email_from": "André <andre@example.com>", "email_to": "a@example.com, B <b@example.com>",
		"email_subject": "résumé", "email_date": "2006-01-02T22:04:05Z", "email_message_id": "id-1@example.com"}
	if !equalMaps(rec.Metadata, wantMD) {
		t.Errorf("metadata = %v, want %v", rec.Metadata, wantMD)
	}
}

func TestEmailHTMLOnlyAndDuplicates(t *testing.T) {
	t.Parallel()
	msg := "Subject: x\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n" +
		"--b\r\nContent-Type: text/html; charset=iso-8859-1\r\n\r\n<b>caf\xe9</b>\r\n" +
		"--b\r\nContent-Disposition: attachment; filename=a.txt\r\n\r\none\r\n" +
		"--b\r\nContent-Disposition: attachment; filename=a.txt\r\n\r\ntwo\r\n" +
		"--b\r\nContent-Disposition: attachment; filename=body.html\r\n\r\nthree\r\n" +
		"--b--\r\n"
	rec := &actiontest.Recorder{}
	if err := New(Config{}).Run(t.Context(), actiontest.NewTask(t, "x", "", []byte(msg), nil, nil), rec); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range rec.Children {
		names = append(names, c.Name+"|"+c.ContentType)
	}
	want := []string{"x/a.txt|", "x/a (2).txt|", "x/body.html|", "x/body (2).html|text/html; charset=utf-8"}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Fatalf("children = %q, want %q", names, want)
	}
	if got := string(rec.Children[3].Data); got != "<pre style=\"white-space:pre-wrap;font-family:sans-serif\"><b>Subject:</b> x\n</pre><hr>\n<b>café</b>" {
		t.Fatalf("html body = %q", got)
	}
}

func TestEmailTruncated(t *testing.T) {
	t.Parallel()
	msg := "Subject: x\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n" +
		"--b\r\nContent-Type: text/plain\r\n\r\nthe body\r\n" +
		"--b\r\nContent-Disposition: attachment; filename=a.bin\r\nContent-Transfer-Encoding: base64\r\n\r\nQUJD\r\n" +
		"--b\r\nContent-Disposition: attachment; filename=b.bin\r\n\r\ncut off in the midd"
	rec := &actiontest.Recorder{}
	err := New(Config{}).Run(t.Context(), actiontest.NewTask(t, "x.eml", "message/rfc822", []byte(msg), nil, nil), rec)
	if !action.IsPermanent(err) || !strings.HasPrefix(err.Error(), "corrupt message: ") {
		t.Fatalf("err = %v", err)
	}
	var names []string
	for _, c := range rec.Children {
		names = append(names, c.Name)
	}
	if strings.Join(names, ",") != "x.eml/a.bin,x.eml/body.txt" {
		t.Fatalf("children = %q", names)
	}
}

func TestEmailOutputFailureIsTransient(t *testing.T) {
	t.Parallel()
	rec := &actiontest.Recorder{MaxChildren: 1}
	err := New(Config{}).Run(t.Context(), actiontest.NewTask(t, "m.eml", "message/rfc822", []byte(crafted), nil, nil), rec)
	if err == nil || action.IsPermanent(err) {
		t.Fatalf("err = %v, want transient", err)
	}
}

func TestMbox(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 100<<10)
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{name: "two", in: "From a Mon Jan 1 00:00:00 2001\nSubject: 1\n\nbody\n>From here\n>>From there\n\nFrom b Mon Jan 1 00:00:00 2001\nSubject: 2\n\nlast",
			want: []string{"Subject: 1\n\nbody\nFrom here\n>From there\n\n", "Subject: 2\n\nlast"}},
		{name: "no separator first", in: "Subject: 0\n\nx\nFrom b\nSubject: 1\n", want: []string{"Subject: 0\n\nx\n", "Subject: 1\n"}},
		{name: "long line", in: "From a\n" + long + "From not a separator\nFrom b\ny\n", want: []string{long + "From not a separator\n", "y\n"}},
		{name: "empty", in: "", want: nil},
		{name: "separator only", in: "From a\n", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := &actiontest.Recorder{}
			err := New(Config{}).Run(t.Context(), actiontest.NewTask(t, "box.mbox", "application/mbox", []byte(tt.in), nil, nil), rec)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for i, c := range rec.Children {
				got = append(got, string(c.Data))
				if c.ContentType != "message/rfc822" || !strings.HasPrefix(c.Name, "box.mbox/message-0000") || !strings.HasSuffix(c.Name, string(rune('1'+i))+".eml") {
					t.Errorf("child %q type %q", c.Name, c.ContentType)
				}
			}
			if len(got) != len(tt.want) {
				t.Fatalf("messages = %q, want %q", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("message %d = %.80q, want %.80q", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestMboxMaxMessages(t *testing.T) {
	t.Parallel()
	in := strings.Repeat("From a\nSubject: x\n\n", 5)
	rec := &actiontest.Recorder{}
	err := New(Config{MaxMessages: 3}).Run(t.Context(), actiontest.NewTask(t, "b", "application/mbox", []byte(in), nil, nil), rec)
	if !action.IsPermanent(err) || err.Error() != "mailbox has more than 3 messages" || len(rec.Children) != 3 {
		t.Fatalf("err = %v, %d children", err, len(rec.Children))
	}
}

func TestKindSniffed(t *testing.T) {
	t.Parallel()
	a := New(Config{}).(*emailAction)
	for in, want := range map[string]string{
		"From x\n":                             kindMbox,
		"Subject: y\n\n":                       kindEML,
		"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1....": kindMsg,
	} {
		task := &action.Task{Item: action.Item{Name: "n"}, OpenBlob: func(context.Context) (io.ReadCloser, error) {
			return io.NopCloser(strings.NewReader(in)), nil
		}}
		if got, _ := a.kind(t.Context(), task); got != want {
			t.Errorf("kind(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestCleanFileName(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"../x": ".._x", "a\\b/c": "a_b_c", "..": "attachment", " ": "attachment",
		"bad\xff\x00": "bad\uFFFD_", strings.Repeat("é", 200): strings.Repeat("é", 127)} {
		if got := cleanFileName(in); got != want {
			t.Errorf("cleanFileName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestEmailMsgNonASCIISubject: msgconvert writes the subject of an Outlook .msg without transport
// headers as raw bytes, Latin-1 when every character fits. It was garbled ("Gr\uFFFD\uFFFDe
// K\uFFFDln"); the subject must come out as written, on the message and on its children.
func TestEmailMsgNonASCIISubject(t *testing.T) {
	t.Parallel()
	needMsgconvert(t)
	for _, tt := range []struct{ file, want string }{
		{"subject-latin1.msg", "Grüße Köln"},
		{"subject-cjk.msg", "Grüß 件名テスト"},
	} {
		t.Run(tt.file, func(t *testing.T) {
			rec := &actiontest.Recorder{}
			task := actiontest.NewFileTask(t, filepath.Join("testdata", tt.file), "application/vnd.ms-outlook", nil, nil)
			if err := New(Config{}).Run(t.Context(), task, rec); err != nil {
				t.Fatal(err)
			}
			if got := rec.Metadata["email_subject"]; got != tt.want {
				t.Errorf("email_subject = %q, want %q", got, tt.want)
			}
			if len(rec.Children) == 0 {
				t.Fatal("no children")
			}
			for _, c := range rec.Children {
				if got := c.Metadata["email_subject"]; got != tt.want {
					t.Errorf("child %s: email_subject = %q, want %q", c.Name, got, tt.want)
				}
			}
			// The document's text carries the headers too, decoded: the body is the last child.
			body := rec.Children[len(rec.Children)-1]
			if !strings.HasSuffix(body.Name, "/body.txt") {
				t.Fatalf("last child %s, want the body", body.Name)
			}
			wantHead := "From: Nick Booth </O=PHILLIPS ORMONDE AND FITZPATRICK/OU=EXCHANGE ADMINISTRATIVE GROUP (FYDIBOHF23SPDLT)/CN=RECIPIENTS/CN=NICK.BOOTH>\n" +
				"To: Nick Booth <nick.booth@pof.com.au>\nSubject: " + tt.want + "\nDate: Thu, 17 Jun 2010 23:54:19 +0000\n\nTest email with 1 msg attachment, 1 pdf"
			if got := string(body.Data); !strings.HasPrefix(got, wantHead) {
				t.Errorf("body text begins %q, want %q", got[:min(len(got), len(wantHead)+20)], wantHead)
			}
			if body.ContentType != "text/plain; charset=utf-8" {
				t.Errorf("body content type %q", body.ContentType)
			}
		})
	}
}

// TestEmailHeadersInText: the body's text begins with From, To, Cc, Subject and Date, decoded, in
// the body's own format; a message without a body becomes one of its headers.
func TestEmailHeadersInText(t *testing.T) {
	t.Parallel()
	const head = "From: =?utf-8?q?Jos=C3=A9?= <j@example.com>\r\nTo: k@example.com\r\n" +
		"Subject: =?iso-8859-1?q?R=E9union_{1}_\\_=F0?=\r\nDate: Tue, 3 Mar 2026 10:00:00 +0100\r\n"
	for _, tt := range []struct{ name, msg, ct, want string }{
		{"declared charset", head + "Content-Type: text/plain; charset=iso-8859-1\r\n\r\ncaf\xe9\r\n",
			"text/plain; charset=utf-8",
			"From: José <j@example.com>\nTo: k@example.com\nSubject: Réunion {1} \\ ð\nDate: Tue, 3 Mar 2026 10:00:00 +0100\n\ncafé\r\n"},
		{"undeclared charset", head + "\r\nna\xefve\r\n", "text/plain; charset=utf-8",
			"From: José <j@example.com>\nTo: k@example.com\nSubject: Réunion {1} \\ ð\nDate: Tue, 3 Mar 2026 10:00:00 +0100\n\nnaïve\r\n"},
		{"html", head + "Content-Type: text/html; charset=utf-8\r\n\r\n<html><BODY class=x><p>hi</p></BODY></html>",
			"text/html; charset=utf-8",
			"<html><BODY class=x><pre style=\"white-space:pre-wrap;font-family:sans-serif\"><b>From:</b> Jos&#233; &lt;j@example.com&gt;\n" +
				"<b>To:</b> k@example.com\n<b>Subject:</b> R&#233;union {1} \\ &#240;\n<b>Date:</b> Tue, 3 Mar 2026 10:00:00 +0100\n</pre><hr>\n<p>hi</p></BODY></html>"},
		{"rtf", head + "Content-Type: application/rtf\r\n\r\n{\\rtf1\\ansi{\\fonttbl{\\f0 Arial;}}\\pard\\plain hi\\par}",
			"application/rtf",
			"{\\rtf1\\ansi{\\fonttbl{\\f0 Arial;}}{\\pard\\plain {\\b From:} Jos\\u233? <j@example.com>\\par\n" +
				"{\\b To:} k@example.com\\par\n{\\b Subject:} R\\u233?union \\{1\\} \\\\ \\u240?\\par\n{\\b Date:} Tue, 3 Mar 2026 10:00:00 +0100\\par\n\\par}\n\\pard\\plain hi\\par}"},
		{"no body", head + "Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Disposition: attachment; filename=a.bin\r\n\r\nxx\r\n--b--\r\n",
			"text/plain; charset=utf-8",
			"From: José <j@example.com>\nTo: k@example.com\nSubject: Réunion {1} \\ ð\nDate: Tue, 3 Mar 2026 10:00:00 +0100\n\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := &actiontest.Recorder{}
			if err := New(Config{}).Run(t.Context(), actiontest.NewTask(t, "m.eml", "message/rfc822", []byte(tt.msg), nil, nil), rec); err != nil {
				t.Fatal(err)
			}
			body := rec.Children[len(rec.Children)-1]
			if !strings.HasPrefix(body.Name, "m.eml/body.") || body.ContentType != tt.ct {
				t.Errorf("body %s (%s), want type %s", body.Name, body.ContentType, tt.ct)
			}
			if got := string(body.Data); got != tt.want {
				t.Errorf("body =\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}
