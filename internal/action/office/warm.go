package office

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluice-project/sluice/internal/converter"
	"github.com/sluice-project/sluice/internal/sandbox"
	"github.com/sluice-project/sluice/internal/subprocess"
	"github.com/sluice-project/sluice/internal/warmpool"
)

// A warm converter is one converter sandbox, kept running with a LibreOffice profile made ahead
// of its first document, and fed the documents of one job, several per LibreOffice call (see
// warmScript). A cold conversion pays per document for the sandbox, a new profile (LibreOffice's
// slow first start) and a start; a warm converter pays for the sandbox and the profile once per
// job and for a start once per batch. A batch hands each document its PDF as soon as LibreOffice
// has moved on to the next one, so that the documents' next steps run while the batch goes on.
//
// Isolation. The documents of one job share a warm converter; documents of different jobs never
// do: each job gets its own converter, sandbox and freshly made profile, and a converter given to
// a job is never given to another. A converter is retired — its whole sandbox killed, its
// directory removed — after [warmMaxDocs] documents, after a batch that did not give every
// document its PDF (a crash, a document LibreOffice could not load), after a batch in which
// LibreOffice spent longer than the time limit of one run on one document, after [warmIdle]
// without work, and when its profile shows a change that conversions do not make (see
// checkProfile); a document's PDF is handed on only once the profile was found unchanged after
// LibreOffice converted it. The sandbox is the cold one's: no network, and a filesystem that
// shows only the converter's own directory (its profile and the batches staged in it); a
// document in it can reach nothing a cold run could not.
//
// Within a job a document could in principle influence how a later document of the same job
// converts (through the profile they share, or a batch's process). The job is the trust domain:
// its documents come from the same submission.

// Limits of warm converters.
const (
	// warmMaxDocs is how many documents a converter converts before it is retired.
	warmMaxDocs = 100
	// warmMaxBatch is the most documents handed to LibreOffice in one call. Each call starts
	// LibreOffice (about 0.8 s of a 2-CPU machine); 64 documents convert in a few seconds, so the
	// start is a small share of a full batch. The time limit applies per document (see
	// runBatch), not to the batch. At most 100: docName numbers a batch's documents in two
	// digits.
	warmMaxBatch = 64
	// warmIdle is how long a converter waits for work before it is retired.
	warmIdle = 20 * time.Second
	// warmGrace is how long a retired converter is given to end its batch script before its
	// sandbox is killed.
	warmGrace = 3 * time.Second
	// warmMax is how many converters serve jobs at once; a job that finds them all busy
	// converts cold.
	warmMax = 2
)

// errNoWarm says a document must be converted cold: no warm converter could take it, or its
// batch did not give it a PDF (the cold run then says why, in its own words).
var errNoWarm = errors.New("office: no warm conversion")

// pool holds the warm converters of one [Action] (see [warmpool.Pool]): at most one per job, at
// most warmMax, plus a spare started ahead of demand. It is safe for concurrent use.
type pool struct {
	warmpool.Pool[*warm]
	// idle, when set, replaces warmIdle (tests on a loaded machine); maxDocs and maxBatch
	// replace warmMaxDocs and warmMaxBatch.
	idle              time.Duration
	maxDocs, maxBatch int
	// started counts the converters started, batches the calls made to them, warmDocs the
	// documents they converted: figures for tests.
	started, batches, warmDocs atomic.Int64
	// lastRetired says why the last converter retired early went.
	lastRetired atomic.Pointer[string]
}

// get returns the warm converter of job, starting one (or taking the spare) when it has none,
// in a new directory under base (the engine's directory of attempt dirs, which it empties when
// it opens; "" means the system's temporary directory). It returns nil when none can be had
// now: warmMax converters are busy with other jobs.
func (p *pool) get(ctx context.Context, job int64, lim converter.Limits, base string) *warm {
	w, ok := p.Get(job, warmMax, func() (*warm, error) { return p.start(ctx, base, lim) })
	if !ok {
		return nil
	}
	return w
}

// limits returns the most documents a converter converts and the most in one batch.
func (p *pool) limits() (docs, batch int) {
	docs, batch = warmMaxDocs, warmMaxBatch
	if p != nil && p.maxDocs > 0 {
		docs = p.maxDocs
	}
	if p != nil && p.maxBatch > 0 {
		batch = min(p.maxBatch, warmMaxBatch)
	}
	return docs, batch
}

func (p *pool) start(ctx context.Context, base string, lim converter.Limits) (*warm, error) {
	idle := p.idle
	if idle <= 0 {
		idle = warmIdle
	}
	w, err := startWarm(ctx, base, lim, p, idle)
	if err == nil {
		p.started.Add(1)
	}
	return w, err
}

// warm is one warm converter. Its batches run one at a time, in its own goroutine.
type warm struct {
	pool    *pool         // for its figures
	idleFor time.Duration // how long it waits for work before it retires
	dir     string        // the sandbox's directory: profile/ and b<N>/ batches
	owner   int           // the uid the sandbox runs as (its directory's owner)
	lim     converter.Limits
	proc    *subprocess.Process
	stdin   *os.File
	lines   chan string   // the script's output, line by line (see read)
	ready   chan struct{} // closed once LibreOffice answers (or the converter failed)
	reqs    chan *warmReq
	quit    chan struct{}
	gone    chan struct{} // closed once the sandbox is gone and the directory removed
	// next starts a converter like w (nil without a pool): w's successor, started during w's
	// last batch.
	next func() (*warm, error)

	mu      sync.Mutex
	pending int // requests queued or in a batch
	done    bool
	served  bool // LibreOffice started in it (see refused)
	// profile is what the profile held once LibreOffice had made it (see checkProfile).
	profile map[string]bool
	docs    int
	batches int
}

// warmReq is one document handed to a warm converter.
type warmReq struct {
	src, ext string
	reply    chan warmResult // buffered: the batch never waits for its requester
}

type warmResult struct {
	pdf []byte
	err error
}

// warmScript runs in the sandbox: it makes the converter's profile by converting a one-line text
// file (a first start in a new profile is the slow one: it fills the profile and restarts
// itself; --terminate_after_init ends before it has), says "ready", then for each batch directory
// read from stdin converts the files in <batch>/in into <batch>/out with one LibreOffice call,
// passes on LibreOffice's output as "<batch>: <line>" (it says "convert <file> -> …" as it
// begins to store a document, once the previous one is stored), and answers "<batch> <exit
// status>". Stdin closed, it ends.
//
// A LibreOffice kept running between batches (a headless one fed by later calls through its
// pipe) was tried: LibreOffice 7.4 ends that process once it has served one forwarded
// conversion, and the next call then runs on its own. So each batch starts LibreOffice, in a
// profile made once: what a warm converter saves per document is the sandbox, the profile and
// the start, shared by the batch.
const warmScript = `set -u
profile="$1"
soffice="$2"
printf 'sluice\n' >warmup.txt
"$soffice" --headless --norestore --nolockcheck "-env:UserInstallation=$profile" --convert-to pdf --outdir warmup warmup.txt </dev/null >office.log 2>&1 || exit 4
rm -rf warmup warmup.txt
echo ready
while IFS= read -r b; do
  case "$b" in b[0-9]*) ;; *) exit 2 ;; esac
  { "$soffice" --headless --norestore --nolockcheck "-env:UserInstallation=$profile" --convert-to pdf --outdir "$b/out" "$b"/in/* </dev/null 2>&1
    echo "$?" >"$b/status"; } | while IFS= read -r line; do printf '%s: %s\n' "$b" "$line"; done
  status=9
  read -r status <"$b/status"
  echo "$b $status"
done
`

// startWarm starts a warm converter in a new directory under base. It returns at once; the
// converter's first batch waits until LibreOffice is up.
func startWarm(ctx context.Context, base string, lim converter.Limits, p *pool, idle time.Duration) (*warm, error) {
	if lim.Timeout <= 0 {
		lim.Timeout = converter.DefaultTimeout
	}
	if lim.MemoryLimit == 0 {
		lim.MemoryLimit = converter.DefaultMemoryLimit
	}
	// soffice is looked up as a cold run looks it up (in PATH), and shown to the sandbox.
	soffice, err := exec.LookPath("soffice")
	if err != nil {
		return nil, fmt.Errorf("soffice: %w", subprocess.ErrNotInstalled)
	}
	if soffice, err = filepath.Abs(soffice); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(base, "sluice-office-")
	if err != nil {
		return nil, err
	}
	profileDir := filepath.Join(dir, "profile")
	if err := writeProfile(profileDir); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	// The environment of a cold run (converter.Runner): the same PATH finds the same soffice.
	env := []string{"PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8", "LC_ALL=C.UTF-8", "HOME=" + dir, "TMPDIR=" + dir}
	profile := url.URL{Scheme: "file", Path: profileDir}
	mem := lim.MemoryLimit
	if mem < 0 {
		mem = 0
	}
	// The CPU limit is per process, over the converter's life: warmMaxDocs documents at the
	// per-document budget of a cold run would be far more than any honest job needs, so the
	// budget of one cold run bounds it, and a converter that reaches it dies and is replaced.
	cpu := int64(2*lim.Timeout/time.Second) + 1
	c := subprocess.Cmd{Path: "/bin/sh", Args: []string{"-c", warmScript, "sluice-office", profile.String(), soffice},
		Dir: dir, Env: env, Stdin: inR, Stdout: outW, MemoryLimit: mem,
		Sandbox: &sandbox.Spec{CPU: cpu, Tools: []string{soffice}}}
	// The converter outlives the task that asked for it: it keeps the task's values (the
	// engine's records of running tools) but not its end.
	proc, err := subprocess.Start(context.WithoutCancel(ctx), c)
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	w := &warm{pool: p, idleFor: idle, dir: dir, lim: lim, proc: proc, stdin: inW, lines: make(chan string, 16),
		ready: make(chan struct{}), reqs: make(chan *warmReq), quit: make(chan struct{}), gone: make(chan struct{}), owner: -1}
	if st, err := os.Stat(dir); err == nil {
		if s, ok := st.Sys().(*syscall.Stat_t); ok {
			w.owner = int(s.Uid)
		}
	}
	if p != nil {
		w.next = func() (*warm, error) { return p.start(ctx, base, lim) }
	}
	go w.read(outR)
	go w.run(outR)
	return w, nil
}

// read passes the script's output to w.lines, one line at a time, and closes it at the output's
// end (the sandbox gone) or once w is gone.
func (w *warm) read(out *os.File) {
	defer close(w.lines)
	s := bufio.NewScanner(out)
	for s.Scan() {
		select {
		case w.lines <- s.Text():
		case <-w.gone:
			return
		}
	}
}

// writeProfile makes a profile directory holding only the hardening settings.
func writeProfile(dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, "user"), 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "user", "registrymodifications.xcu"), []byte(hardening), 0o600)
}

// convert converts the document at src (of extension ext) in w's next batch. It returns
// warmpool.ErrRetry when it never reached LibreOffice here (w retired first, or LibreOffice
// failed in the batch before it opened the document), errNoWarm when it must be converted cold.
func (w *warm) convert(ctx context.Context, src, ext string, heartbeat func()) ([]byte, error) {
	w.mu.Lock()
	if w.done {
		w.mu.Unlock()
		return nil, w.refused()
	}
	w.pending++
	w.mu.Unlock()
	r := &warmReq{src: src, ext: ext, reply: make(chan warmResult, 1)}
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	select {
	case w.reqs <- r:
	case <-w.quit:
		w.finish(1)
		return nil, w.refused()
	case <-ctx.Done():
		w.finish(1)
		return nil, ctx.Err()
	}
	for {
		select {
		case res := <-r.reply:
			return res.pdf, res.err
		case <-tick.C:
			if heartbeat != nil {
				heartbeat()
			}
		case <-ctx.Done():
			// The batch goes on without this document's requester.
			return nil, ctx.Err()
		}
	}
}

// refused is the answer to a request w did not take: warmpool.ErrRetry once LibreOffice has started
// in it (it retired after warmMaxDocs, or a batch failed), errNoWarm when it never started — a
// LibreOffice that does not start in one converter will not in the next.
func (w *warm) refused() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.served {
		return warmpool.ErrRetry
	}
	return errNoWarm
}

func (w *warm) finish(n int) {
	w.mu.Lock()
	w.pending -= n
	w.mu.Unlock()
}

func (w *warm) Idle() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pending == 0 || w.done
}

// Gone is closed once w's sandbox is gone and its directory removed.
func (w *warm) Gone() <-chan struct{} { return w.gone }

func (w *warm) Retired() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.done
}

// Retire ends w: its sandbox is killed and its directory removed once its current batch (if any)
// has returned. It is idempotent and does not wait.
func (w *warm) Retire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.done = true
		close(w.quit)
	}
}

// run serves w's batches until it is retired, then kills its sandbox and removes its directory.
func (w *warm) run(replies *os.File) {
	defer close(w.gone)
	defer func() {
		w.Retire()
		// Closing stdin ends the script (it is fed nothing more), which it does at once between
		// batches; after a grace period the sandbox is killed.
		w.stdin.Close()
		t := time.NewTimer(warmGrace)
		select {
		case <-w.proc.Done():
		case <-t.C:
		}
		t.Stop()
		w.proc.Stop()
		replies.Close()
		if err := os.RemoveAll(w.dir); err != nil {
			w.note("remove its directory: %v", err)
		}
		// Requests that raced the retirement go to another converter (or cold).
		for {
			select {
			case r := <-w.reqs:
				w.finish(1)
				r.reply <- warmResult{err: w.refused()}
			default:
				return
			}
		}
	}()
	if !w.awaitReady() {
		return
	}
	w.mu.Lock()
	w.served = true
	w.mu.Unlock()
	maxDocs, maxBatch := w.pool.limits()
	idle := time.NewTimer(w.idleFor)
	defer idle.Stop()
	for {
		var batch []*warmReq
		select {
		case r := <-w.reqs:
			batch = append(batch, r)
		case <-idle.C:
			return
		case <-w.quit:
			return
		}
	more:
		for len(batch) < maxBatch {
			select {
			case r := <-w.reqs:
				batch = append(batch, r)
			default:
				break more
			}
		}
		if w.next != nil && w.docs+len(batch) >= maxDocs {
			// Its last batch: its successor starts now (LibreOffice makes its profile, a few
			// seconds) and is up when the job's next documents come.
			w.pool.Prestart(w.next)
		}
		ok := w.runBatch(batch)
		w.finish(len(batch))
		if !ok || w.docs >= maxDocs {
			return
		}
		if !idle.Stop() {
			select {
			case <-idle.C:
			default:
			}
		}
		idle.Reset(w.idleFor)
	}
}

// awaitReady waits for the script's "ready" and snapshots the profile LibreOffice made.
func (w *warm) awaitReady() bool {
	t := time.NewTimer(w.lim.Timeout)
	defer t.Stop()
	select {
	case line := <-w.lines:
		ok := line == "ready"
		if ok {
			w.profile, ok = profileFiles(filepath.Join(w.dir, "profile"))
		}
		if !ok {
			<-w.proc.Done()
			log, _ := os.ReadFile(filepath.Join(w.dir, "office.log"))
			w.note("did not start: %v: %s", w.proc.Err(), bytes.TrimSpace(log))
		}
		return ok
	case <-t.C:
		w.note("did not start within %s", w.lim.Timeout)
	case <-w.quit:
	case <-w.proc.Done():
		w.note("did not start: %v", w.proc.Err())
	}
	return false
}

// note keeps why w was retired early, for tests and the pool's figures.
func (w *warm) note(format string, args ...any) {
	if w.pool != nil {
		why := fmt.Sprintf(format, args...)
		w.pool.lastRetired.Store(&why)
	}
}

// runBatch converts batch in one LibreOffice call, answers each request, and reports whether the
// converter may serve another batch.
//
// A document's PDF is complete once LibreOffice says it converts the next one (it says so as it
// begins to store a document, the previous one stored): that document is answered then, after a
// look at the profile, while the batch goes on. The rest are answered when the call has ended.
// LibreOffice is given the time limit of one run per document: a batch whose LibreOffice says
// nothing new for that long is killed.
//
// When LibreOffice fails in a batch (it crashed, or was killed), the document it was storing
// and the next, which it may have been loading, are converted cold: the cold run says what is
// wrong with them. It converts a batch's documents in the order of their names, so the ones
// after those two it never opened, and they are offered to another warm converter.
func (w *warm) runBatch(batch []*warmReq) bool {
	w.batches++
	if w.pool != nil {
		w.pool.batches.Add(1)
	}
	name := "b" + strconv.Itoa(w.batches)
	bdir := filepath.Join(w.dir, name)
	defer os.RemoveAll(bdir)
	b := &warmBatch{w: w, name: name, reqs: batch, answered: make([]bool, len(batch)), trusted: true, last: -1}
	root, err := w.stage(bdir, b)
	if err != nil {
		w.note("stage a batch: %v", err)
		b.answerRest(0)
		return false
	}
	defer root.Close()
	b.root = root
	called := b.call()
	sanitized := sandbox.Sanitize(bdir) == nil
	b.check()
	for i := range batch {
		if !b.answered[i] && b.staged(i) {
			b.deliver(i)
		}
	}
	unopened := len(batch)
	if !called {
		unopened = b.last + 2
	}
	healthy := !b.answerRest(unopened) && called && sanitized
	if !called {
		// Last, so that it is the note kept.
		w.note("batch %s failed: %s", name, b.failure())
	}
	if !healthy {
		w.Retire()
	}
	w.docs += len(batch)
	return healthy
}

// warmBatch is the state of one batch of a warm converter.
type warmBatch struct {
	w    *warm
	name string // its directory's name, b<N>
	reqs []*warmReq
	root *os.Root // its directory
	// unstaged marks the documents that could not be staged.
	unstaged map[int]bool
	answered []bool
	// trusted says the profile was as conversions leave it when last looked at.
	trusted bool
	tail    []string // LibreOffice's last lines of output, for a note
	// slow says the call was ended for making no progress within the time limit.
	slow bool
	// last is the document LibreOffice said it converts last, -1 before the first.
	last int
}

// failure says why the call failed, for a note.
func (b *warmBatch) failure() string {
	if b.slow {
		return fmt.Sprintf("no progress within %s", b.w.lim.Timeout)
	}
	return fmt.Sprintf("%v: %s", b.w.proc.Err(), strings.Join(b.tail, "\n"))
}

func (b *warmBatch) staged(i int) bool { return !b.unstaged[i] }

// call hands the batch to the script and follows LibreOffice through it, answering each
// document it has done with. It reports whether the call succeeded.
func (b *warmBatch) call() bool {
	w := b.w
	if _, err := fmt.Fprintln(w.stdin, b.name); err != nil {
		return false
	}
	t := time.NewTimer(w.lim.Timeout)
	defer t.Stop()
	converting := -1
	for {
		select {
		case line, ok := <-w.lines:
			if !ok {
				return false
			}
			out, ok := strings.CutPrefix(line, b.name+": ")
			if !ok {
				return line == b.name+" 0"
			}
			if b.tail = append(b.tail, out); len(b.tail) > 10 {
				b.tail = b.tail[1:]
			}
			i, ok := convertingDoc(out, len(b.reqs))
			if !ok {
				continue
			}
			if converting >= 0 && converting != i && !b.answered[converting] {
				if b.check() {
					b.deliver(converting)
				}
			}
			converting, b.last = i, i
			t.Reset(w.lim.Timeout)
		case <-t.C:
			// Too slow: kill the sandbox; its output ends with it.
			b.slow = true
			w.proc.Stop()
			return false
		}
	}
}

// docName is the name of a batch's document i, without its extension: doc-<i>, i in two digits,
// so that the names sort (LibreOffice's order, the shell's glob) as the documents do.
func docName(i int) string { return fmt.Sprintf("doc-%02d", i) }

// convertingDoc reads LibreOffice's "convert <dir>/in/doc-<i><ext> -> …" and returns i.
func convertingDoc(line string, n int) (int, bool) {
	rest, ok := strings.CutPrefix(line, "convert ")
	if !ok {
		return 0, false
	}
	src, _, ok := strings.Cut(rest, " -> ")
	if !ok {
		return 0, false
	}
	base, ok := strings.CutPrefix(filepath.Base(src), "doc-")
	if !ok || filepath.Base(filepath.Dir(src)) != "in" {
		return 0, false
	}
	i, err := strconv.Atoi(strings.TrimSuffix(base, filepath.Ext(base)))
	if err != nil || i < 0 || i >= n {
		return 0, false
	}
	return i, true
}

// check looks at the profile (see checkProfile) unless it was found changed before, and
// reports whether it is as conversions leave it.
func (b *warmBatch) check() bool {
	if b.trusted {
		var change string
		if b.trusted, change = b.w.checkProfile(); !b.trusted {
			b.w.note("batch %s: the profile changed: %s", b.name, change)
		}
	}
	return b.trusted
}

// deliver answers document i with its PDF if LibreOffice wrote one and the profile is trusted.
// The PDF is opened within the batch's directory, not following a link out of it, and only if
// it is a regular file: LibreOffice may still run, and the directory is its to change.
func (b *warmBatch) deliver(i int) {
	if !b.trusted {
		return
	}
	f, err := b.root.OpenFile(filepath.Join("out", docName(i)+".pdf"), os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		// LibreOffice could not load it, or crashed on it: the cold run says which.
		b.w.note("batch %s: no pdf for document %d: %v", b.name, i, err)
		return
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		b.w.note("batch %s: the pdf of document %d is not a file", b.name, i)
		return
	}
	pdf, err := readPDFFile(f)
	if err != nil {
		b.w.note("batch %s: read the pdf of document %d: %v", b.name, i, err)
		return
	}
	b.answered[i] = true
	if b.w.pool != nil { // counted before the answer: a test that has it sees the count
		b.w.pool.warmDocs.Add(1)
	}
	b.reqs[i].reply <- warmResult{pdf: pdf}
}

// answerRest sends every request not yet answered to a cold conversion, those from unopened on
// (documents LibreOffice never opened) to another warm converter, and reports whether there
// were any.
func (b *warmBatch) answerRest(unopened int) bool {
	left := false
	for i, r := range b.reqs {
		if !b.answered[i] {
			b.answered[i] = true
			left = true
			err := errNoWarm
			if i >= unopened {
				err = warmpool.ErrRetry
			}
			r.reply <- warmResult{err: err}
		}
	}
	return left
}

// stage copies the batch's documents into bdir/in as doc-<i><ext> (fixed names keep odd ones
// away from LibreOffice's command line and apart from each other) and makes bdir/out, all owned by
// the sandbox's user. It marks the documents it could not stage and returns bdir, opened.
func (w *warm) stage(bdir string, b *warmBatch) (*os.Root, error) {
	if err := os.Mkdir(bdir, 0o700); err != nil {
		return nil, err
	}
	// Opened before the sandbox's user owns it: what the batch reads later is within it.
	root, err := os.OpenRoot(bdir)
	if err != nil {
		return nil, err
	}
	in, out := filepath.Join(bdir, "in"), filepath.Join(bdir, "out")
	for _, d := range []string{in, out} {
		if err := os.Mkdir(d, 0o700); err != nil {
			root.Close()
			return nil, err
		}
	}
	for _, d := range []string{bdir, in, out} {
		if err := w.chown(d); err != nil {
			root.Close()
			return nil, err
		}
	}
	b.unstaged = map[int]bool{}
	for i, r := range b.reqs {
		dst := filepath.Join(in, docName(i)+r.ext)
		if converter.CopyFile(r.src, dst) != nil || w.chown(dst) != nil {
			b.unstaged[i] = true
		}
	}
	return root, nil
}

func (w *warm) chown(p string) error {
	if w.owner < 0 || w.owner == os.Geteuid() {
		return nil
	}
	return os.Lchown(p, w.owner, w.owner)
}

// profileFiles lists the files of a profile directory (paths relative to it).
func profileFiles(dir string) (map[string]bool, bool) {
	files := map[string]bool{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files[rel] = true
		return nil
	})
	return files, err == nil
}

// maxRegistry bounds the profile's registrymodifications.xcu that [warm.checkProfile] reads: the
// hardening settings and what LibreOffice records over thousands of conversions take tens of KB.
const maxRegistry = 4 << 20

// checkProfile reports whether the profile still looks as conversions leave it: every hardening
// setting still in registrymodifications.xcu, and no file that was not there once the profile
// was made where code is kept ([holdsCode]). A document that managed to change the profile —
// undo a hardening setting, plant a macro library or an extension — fails this, and the batch
// it was found after is discarded and the converter retired.
func (w *warm) checkProfile() (bool, string) {
	dir := filepath.Join(w.dir, "profile")
	// The converter writes this file, so a document may have made it any size (up to the
	// sandbox's 4 GiB file limit): one larger than conversions leave it fails the check unread.
	regPath := filepath.Join(dir, "user", "registrymodifications.xcu")
	if fi, err := os.Stat(regPath); err != nil {
		return false, err.Error()
	} else if fi.Size() > maxRegistry {
		return false, fmt.Sprintf("registrymodifications.xcu has grown to %d bytes (more than %d)", fi.Size(), maxRegistry)
	}
	reg, err := os.ReadFile(regPath)
	if err != nil {
		return false, err.Error()
	}
	for _, line := range strings.Split(strings.TrimSpace(hardening), "\n") {
		if strings.HasPrefix(line, "<item ") && !bytes.Contains(reg, []byte(line)) {
			return false, "a hardening setting is gone: " + line
		}
	}
	now, ok := profileFiles(dir)
	if !ok {
		return false, "the profile cannot be listed"
	}
	for p := range now {
		if !w.profile[p] && holdsCode(p) {
			return false, "a new file where code is kept: " + p
		}
	}
	return true, ""
}

// holdsCode reports whether a profile path lies where LibreOffice keeps code it would run or
// load: Basic macro libraries (user/basic), scripts (user/Scripts) and extensions
// (user/uno_packages/cache/uno_packages, user/extensions/*/extensions). Conversions create none
// of these; the rest of the profile (caches, backups, module configuration, extension
// registries, the packed copy under user/pack) fills in as LibreOffice loads its modules.
func holdsCode(p string) bool {
	for _, prefix := range []string{"user/basic/", "user/Scripts", "user/uno_packages/cache/uno_packages/",
		"user/extensions/tmp/extensions/", "user/extensions/shared/extensions/", "user/extensions/bundled/extensions/"} {
		if strings.HasPrefix(p, prefix) || p+"/" == prefix {
			return true
		}
	}
	return false
}
