// Package email implements the `email` action of the documents workflow. It reads RFC 822
// messages (.eml), mbox mailboxes and Outlook .msg files and creates child items that the
// workflow routes again:
//
//   - A message (message/rfc822) becomes its body, one child "<name>/body.txt" (text/plain, the
//     preferred alternative), else "<name>/body.html" (text/html), else "<name>/body.rtf"
//     (application/rtf, as Outlook writes it), created last; plus one child per attachment
//     "<name>/<file name>" in message order, with the attachment's file name cleaned to a single
//     path component (or "attachment-<n>[.ext]", or "message-<n>.eml" for an embedded message
//     without one; duplicates get " (2)", " (3)", …). Attachments carry no content type, so
//     detect sniffs them, except embedded messages, which are message/rfc822. Several inline
//     text/plain parts are joined, in order, into one body.
//   - An mbox (application/mbox) becomes one child per message, "<name>/message-00001.eml", …,
//     each with content type message/rfc822, so every message is then unpacked like a .eml. The
//     "From " separator lines are dropped and ">From " (mboxrd/mboxo quoting) is unquoted.
//   - An Outlook .msg (application/vnd.ms-outlook) is converted to RFC 822 by Debian's msgconvert
//     (package libemail-outlook-message-perl, which also needs libemail-address-perl) run as a
//     subprocess, then handled like a .eml. msgconvert (a Perl program) is run so that its output
//     depends on the .msg alone (see deterministicPerl): its MIME boundaries and Content-IDs are
//     made of the time, random numbers, its pid and the host name, and a message without a date
//     gets the time of the run, so the same .msg converted twice made different children — and a
//     replay after a crash found its recorded children changed (a nondeterministic action).
//
// The body's text begins with the message's From, To, Cc, Subject and Date (see addHeaders),
// so that a search or a reader of the document sees them; a message without a body becomes a
// body.txt of its headers alone.
//
// Headers go into metadata under "email_from", "email_to", "email_cc", "email_subject",
// "email_date" (RFC 3339, UTC) and "email_message_id", both on the item (SetMetadata) and on
// each child it creates. A key the item already has is never overwritten; one consequence is
// that a message attached to a message keeps the outer message's header keys when the engine
// copies a parent's metadata to its children.
//
// Bodies and text attachments are converted to UTF-8 with github.com/emersion/go-message's
// charset support; a body that was converted is typed "; charset=utf-8". Body parts are
// buffered in the task's temporary directory, never in memory; attachments are streamed.
package email

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/converter"
	"github.com/sluice-project/sluice/internal/subprocess"
)

// Config configures the email action. The zero value uses the defaults.
type Config struct {
	// MsgConvert is the msgconvert program. Defaults to "msgconvert" (looked up in PATH).
	MsgConvert string
	// Timeout bounds one msgconvert run. Defaults to 120s.
	Timeout time.Duration
	// MemoryLimit caps msgconvert's address space in bytes. Defaults to 1 GiB.
	MemoryLimit int64
	// MaxMessages is the most messages read from one mbox. Defaults to 100,000.
	MaxMessages int
	// MaxParts is the most MIME parts read from one message (multiparts count); over it the
	// message is a permanent error, the attachments before it kept. Defaults to 10,000.
	// Multiparts nest at most 32 deep, a bound of its own.
	MaxParts int
}

type emailAction struct {
	cfg Config
}

// New returns the email action. See the package documentation for what it creates.
func New(cfg Config) action.Action {
	if cfg.MsgConvert == "" {
		cfg.MsgConvert = "msgconvert"
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 120 * time.Second
	}
	if cfg.MemoryLimit <= 0 {
		cfg.MemoryLimit = 1 << 30
	}
	if cfg.MaxMessages <= 0 {
		cfg.MaxMessages = 100_000
	}
	if cfg.MaxParts <= 0 {
		cfg.MaxParts = defaultMaxParts
	}
	return &emailAction{cfg: cfg}
}

// Spec describes the action.
func (a *emailAction) Spec() action.Spec {
	w := 0.1
	return action.Spec{
		Name:           "email",
		Version:        "2", // 2: the body's text begins with the headers
		Doc:            "unpack an email (.eml, mbox, Outlook .msg) into its body and attachments",
		ProgressWeight: &w,
	}
}

// Policy caches the action's effects by its input (the conversion cache).
func (a *emailAction) Policy() action.Policy { return action.Policy{Cacheable: true} }

const (
	kindEML  = "message/rfc822"
	kindMbox = "application/mbox"
	kindMsg  = "application/vnd.ms-outlook"
)

// Run unpacks the item's message, mailbox or .msg file.
func (a *emailAction) Run(ctx context.Context, t *action.Task, out action.Output) error {
	kind, err := a.kind(ctx, t)
	if err != nil {
		return err
	}
	out.Heartbeat()
	switch kind {
	case kindMbox:
		return a.runMbox(ctx, t, out)
	case kindMsg:
		return a.runMsg(ctx, t, out)
	default:
		rc, err := t.OpenBlob(ctx)
		if err != nil {
			return fmt.Errorf("open blob: %w", err)
		}
		defer rc.Close()
		return unpackMessage(ctx, t, out, rc, a.cfg.MaxParts)
	}
}

// kind returns which of the three inputs the item is: from its content type when it names one,
// else from its first bytes.
func (a *emailAction) kind(ctx context.Context, t *action.Task) (string, error) {
	ct := strings.ToLower(t.Item.ContentType)
	ct, _, _ = strings.Cut(ct, ";")
	switch strings.TrimSpace(ct) {
	case kindEML, "application/eml":
		return kindEML, nil
	case kindMbox, "application/x-mbox":
		return kindMbox, nil
	case kindMsg, "application/x-msg":
		return kindMsg, nil
	}
	rc, err := t.OpenBlob(ctx)
	if err != nil {
		return "", fmt.Errorf("open blob: %w", err)
	}
	defer rc.Close()
	var head [8]byte
	n, _ := io.ReadFull(rc, head[:])
	switch {
	case n == 8 && string(head[:]) == "\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1":
		return kindMsg, nil
	case n >= 5 && string(head[:5]) == "From ":
		return kindMbox, nil
	}
	return kindEML, nil
}

// runMsg converts an Outlook .msg to RFC 822 with msgconvert and unpacks that.
func (a *emailAction) runMsg(ctx context.Context, t *action.Task, out action.Output) error {
	in, err := t.BlobPath(ctx)
	if err != nil {
		return fmt.Errorf("blob path: %w", err)
	}
	dir, err := os.MkdirTemp(t.TempDir, "msgconvert-")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	eml := filepath.Join(dir, "message.eml")
	r := &converter.Runner{Limits: converter.Limits{Timeout: a.cfg.Timeout, MemoryLimit: a.cfg.MemoryLimit}, Dir: dir, Heartbeat: out.Heartbeat}
	if in, err = r.Stage(in); err != nil {
		return err
	}
	prog, err := exec.LookPath(a.cfg.MsgConvert)
	if err != nil {
		return action.Permanentf("email conversion of .msg needs msgconvert: apt-get install libemail-outlook-message-perl")
	}
	name, args := prog, []string{"--outfile", eml, in}
	if isPerl(prog) {
		if perl, err := exec.LookPath("perl"); err == nil {
			name, args = perl, append([]string{"-e", deterministicPerl, "--", prog}, args...)
		}
	}
	r.Env = []string{"TZ=UTC", "SLUICE_SEED=" + seedOf(t.Item.BlobSHA256)}
	err = r.Run(ctx, name, args, nil)
	var ee *subprocess.ExitError
	switch {
	case action.IsPermanent(err):
		return err
	case errors.As(err, &ee):
		if strings.Contains(ee.Stderr, "Email/Address") {
			return action.Permanentf("email conversion of .msg needs msgconvert's Email::Address: apt-get install libemail-address-perl")
		}
		return action.Permanentf("convert .msg: %s", oneLine(ee.Error()))
	case err != nil:
		return fmt.Errorf("convert .msg: %w", err)
	}
	f, err := os.Open(eml)
	if err != nil {
		return action.Permanentf("convert .msg: msgconvert wrote no message")
	}
	defer f.Close()
	return unpackMessage(ctx, t, out, f, a.cfg.MaxParts)
}

// deterministicPerl runs a Perl program (msgconvert, its path the first argument) so that what
// it writes depends on its input alone: time() is the epoch (it is read only for generated ids,
// and for the Date of a message that has none of its own, which then says 1 January 1970 rather
// than the time of the run), the random numbers are seeded from the .msg's hash (SLUICE_SEED: so
// a message cannot be written to contain the boundaries its conversion will use), its pid is 1
// and the host name of generated ids is "msgconvert.invalid". Email::MessageID keeps ids unique
// within the run by counting ids made in the same second. TZ=UTC fixes the date's zone.
const deterministicPerl = `BEGIN { *CORE::GLOBAL::time = sub () { 0 } }
srand($ENV{SLUICE_SEED} || 1);
$$ = 1;
require Email::MessageID;
{ no warnings "redefine"; *Email::MessageID::create_host = sub { "msgconvert.invalid" }; }
my $prog = shift @ARGV;
$0 = $prog;
my $ok = do $prog;
die $@ if $@;
die "$prog: $!\n" unless defined $ok || !$!;
`

// seedOf returns a seed for deterministicPerl from a blob's hex SHA-256: its first 32 bits.
func seedOf(sha string) string {
	if len(sha) < 8 {
		return "1"
	}
	n, err := strconv.ParseUint(sha[:8], 16, 32)
	if err != nil || n == 0 {
		return "1"
	}
	return strconv.FormatUint(n, 10)
}

// isPerl reports whether the program at path is a Perl script (its first line names perl).
func isPerl(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	line, _ := bufio.NewReader(io.LimitReader(f, 256)).ReadString('\n')
	return strings.HasPrefix(line, "#!") && strings.Contains(line, "perl")
}

// runMbox creates one message/rfc822 child per message of an mbox.
func (a *emailAction) runMbox(ctx context.Context, t *action.Task, out action.Output) error {
	rc, err := t.OpenBlob(ctx)
	if err != nil {
		return fmt.Errorf("open blob: %w", err)
	}
	defer rc.Close()
	cr := &countingReader{r: rc}
	sp := newMboxSplitter(cr)
	last := time.Now()
	for i := 1; ; i++ {
		msg, ok := sp.next()
		if !ok {
			break
		}
		if i > a.cfg.MaxMessages {
			return action.Permanentf("mailbox has more than %d messages", a.cfg.MaxMessages)
		}
		progress(out, t.Item.Size, cr.n)
		if time.Since(last) > 5*time.Second {
			out.Heartbeat()
			last = time.Now()
		}
		err := out.CreateChild(ctx, action.Child{
			Name:        fmt.Sprintf("%s/message-%05d.eml", t.Item.Name, i),
			ContentType: kindEML,
			Blob:        msg,
		})
		if err != nil {
			if sp.err != nil {
				return action.Permanentf("read mailbox: %s", oneLine(sp.err.Error()))
			}
			return fmt.Errorf("create message %d: %w", i, err)
		}
	}
	if sp.err != nil {
		return action.Permanentf("read mailbox: %s", oneLine(sp.err.Error()))
	}
	out.Progress(1)
	return nil
}

func progress(out action.Output, size, n int64) {
	if size > 0 {
		out.Progress(min(1, float64(n)/float64(size)))
	}
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// mboxSplitter cuts an mbox stream into messages at "From " lines, streaming each message.
type mboxSplitter struct {
	br      *bufio.Reader
	started bool
	done    bool  // the stream has ended
	err     error // a read error other than EOF
	cur     *mboxMessage
}

func newMboxSplitter(r io.Reader) *mboxSplitter {
	return &mboxSplitter{br: bufio.NewReaderSize(r, 64<<10)}
}

// next returns the next message's reader. The previous message's reader must not be used
// after next is called: the rest of it is skipped.
func (s *mboxSplitter) next() (io.Reader, bool) {
	if s.cur != nil {
		_, _ = io.Copy(io.Discard, s.cur)
	}
	if !s.started {
		s.started = true
		// Skip the first separator; text before any separator is a message of its own.
		head, err := s.br.Peek(5)
		if err == nil && string(head) == "From " {
			s.skipLine()
		}
	}
	if s.done || s.err != nil {
		return nil, false
	}
	if _, err := s.br.Peek(1); err != nil {
		if !errors.Is(err, io.EOF) {
			s.err = err
		}
		s.done = true
		return nil, false
	}
	s.cur = &mboxMessage{s: s, atStart: true}
	return s.cur, true
}

// skipLine discards the rest of the current line.
func (s *mboxSplitter) skipLine() {
	for {
		_, err := s.br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			s.err = err
		}
		if errors.Is(err, io.EOF) {
			s.done = true
		}
		return
	}
}

// mboxMessage reads one message: up to, not including, the next "From " line.
type mboxMessage struct {
	s       *mboxSplitter
	pending []byte // bytes of the current line not yet returned
	atStart bool   // the next byte read starts a line
	ended   bool
}

func (m *mboxMessage) Read(p []byte) (int, error) {
	for len(m.pending) == 0 {
		if m.ended || m.s.done {
			return 0, io.EOF
		}
		if m.s.err != nil {
			return 0, m.s.err
		}
		if m.atStart {
			if head, err := m.s.br.Peek(5); err == nil && string(head) == "From " {
				m.s.skipLine()
				m.ended = true
				return 0, io.EOF
			}
		}
		line, err := m.s.br.ReadSlice('\n')
		m.pending = line
		if m.atStart && isQuotedFrom(line) {
			m.pending = line[1:]
		}
		m.atStart = err == nil // a full line was read
		switch {
		case err == nil, errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF):
			m.s.done = true
		default:
			m.s.err = err
		}
	}
	n := copy(p, m.pending)
	m.pending = m.pending[n:]
	return n, nil
}

// isQuotedFrom reports whether line is ">From ", ">>From ", … (mboxrd quoting).
func isQuotedFrom(line []byte) bool {
	i := 0
	for i < len(line) && line[i] == '>' {
		i++
	}
	return i > 0 && strings.HasPrefix(string(line[i:min(len(line), i+5)]), "From ")
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300]
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
