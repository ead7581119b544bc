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
// job and for a start once per batch.
//
// Isolation. The documents of one job share a warm converter; documents of different jobs never
// do: each job gets its own converter, sandbox and freshly made profile, and a converter given to
// a job is never given to another. A converter is retired — its whole sandbox killed, its
// directory removed — after [warmMaxDocs] documents, after a batch that did not give every
// document its PDF (a crash, a document LibreOffice could not load), after a batch that ran past
// its time limit, after [warmIdle] without work, and when its profile shows a change that
// conversions do not make (see checkProfile). The sandbox is the cold one's: no network, and a
// filesystem that shows only the converter's own directory (its profile and the batches staged
// in it); a document in it can reach nothing a cold run could not.
//
// Within a job a document could in principle influence how a later document of the same job
// converts (through the profile they share, or a batch's process). The job is the trust domain:
// its documents come from the same submission.

// Limits of warm converters.
const (
	// warmMaxDocs is how many documents a converter converts before it is retired.
	warmMaxDocs = 100
	// warmMaxBatch is the most documents handed to LibreOffice in one call.
	warmMaxBatch = 16
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
	// idle, when set, replaces warmIdle (tests on a loaded machine).
	idle time.Duration
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
	replies *bufio.Scanner
	ready   chan struct{} // closed once LibreOffice answers (or the converter failed)
	reqs    chan *warmReq
	quit    chan struct{}
	gone    chan struct{} // closed once the sandbox is gone and the directory removed

	mu      sync.Mutex
	pending int // requests queued or in a batch
	done    bool
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
// itself; --terminate_after_init ends before it has), says "ready", then for each batch directory read from stdin converts the
// files in <batch>/in into <batch>/out with one LibreOffice call, and answers "<batch> <exit
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
  "$soffice" --headless --norestore --nolockcheck "-env:UserInstallation=$profile" --convert-to pdf --outdir "$b/out" "$b"/in/* </dev/null >"$b/log" 2>&1
  echo "$b $?"
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
	w := &warm{pool: p, idleFor: idle, dir: dir, lim: lim, proc: proc, stdin: inW, replies: bufio.NewScanner(outR),
		ready: make(chan struct{}), reqs: make(chan *warmReq), quit: make(chan struct{}), gone: make(chan struct{}), owner: -1}
	if st, err := os.Stat(dir); err == nil {
		if s, ok := st.Sys().(*syscall.Stat_t); ok {
			w.owner = int(s.Uid)
		}
	}
	go w.run(outR)
	return w, nil
}

// writeProfile makes a profile directory holding only the hardening settings.
func writeProfile(dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, "user"), 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "user", "registrymodifications.xcu"), []byte(hardening), 0o600)
}

// convert converts the document at src (of extension ext) in w's next batch. It returns
// errNoWarm when the document must be converted cold.
func (w *warm) convert(ctx context.Context, src, ext string, heartbeat func()) ([]byte, error) {
	w.mu.Lock()
	if w.done {
		w.mu.Unlock()
		return nil, errNoWarm
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
		return nil, errNoWarm
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
		// Requests that raced the retirement go cold.
		for {
			select {
			case r := <-w.reqs:
				w.finish(1)
				r.reply <- warmResult{err: errNoWarm}
			default:
				return
			}
		}
	}()
	if !w.awaitReady() {
		return
	}
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
		for len(batch) < warmMaxBatch {
			select {
			case r := <-w.reqs:
				batch = append(batch, r)
			default:
				break more
			}
		}
		ok := w.runBatch(batch)
		w.finish(len(batch))
		if !ok || w.docs >= warmMaxDocs {
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
	got := make(chan bool, 1)
	go func() { got <- w.replies.Scan() && w.replies.Text() == "ready" }()
	t := time.NewTimer(w.lim.Timeout)
	defer t.Stop()
	select {
	case ok := <-got:
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
func (w *warm) runBatch(batch []*warmReq) bool {
	w.batches++
	name := "b" + strconv.Itoa(w.batches)
	bdir := filepath.Join(w.dir, name)
	fail := func(rs []*warmReq) {
		for _, r := range rs {
			r.reply <- warmResult{err: errNoWarm}
		}
	}
	staged, err := w.stage(bdir, batch)
	if err != nil {
		w.note("stage a batch: %v", err)
		fail(batch)
		return false
	}
	healthy := w.call(name)
	if err := sandbox.Sanitize(bdir); err != nil {
		healthy = false
	}
	// A profile changed behind LibreOffice's back discredits the whole batch: its documents go
	// cold, and the converter is retired before they do.
	trusted, change := w.checkProfile()
	if !healthy {
		log, _ := os.ReadFile(filepath.Join(bdir, "log"))
		w.note("batch %s failed: %v: %s", name, w.proc.Err(), bytes.TrimSpace(log))
	}
	if !trusted {
		w.note("batch %s: the profile changed: %s", name, change)
	}
	pdfs := make([][]byte, len(batch))
	for i := range batch {
		if !staged[i] || !trusted {
			healthy = false
			continue
		}
		pdf, err := readPDF(filepath.Join(bdir, "out", "doc-"+strconv.Itoa(i)+".pdf"))
		if err != nil {
			// LibreOffice could not load it, or crashed on it: the cold run says which.
			w.note("batch %s: no pdf for document %d: %v", name, i, err)
			healthy = false
			continue
		}
		pdfs[i] = pdf
	}
	os.RemoveAll(bdir)
	if !healthy {
		w.Retire()
	}
	w.docs += len(batch)
	converted := 0
	for i, r := range batch {
		if pdfs[i] == nil {
			r.reply <- warmResult{err: errNoWarm}
			continue
		}
		converted++
		r.reply <- warmResult{pdf: pdfs[i]}
	}
	if w.pool != nil {
		w.pool.batches.Add(1)
		w.pool.warmDocs.Add(int64(converted))
	}
	return healthy
}

// stage copies the batch's documents into bdir/in as doc-<i><ext> (fixed names keep odd ones
// away from LibreOffice's command line and apart from each other) and makes bdir/out, all owned by
// the sandbox's user. It reports which documents it staged.
func (w *warm) stage(bdir string, batch []*warmReq) ([]bool, error) {
	in, out := filepath.Join(bdir, "in"), filepath.Join(bdir, "out")
	for _, d := range []string{bdir, in, out} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, err
		}
		if err := w.chown(d); err != nil {
			return nil, err
		}
	}
	staged := make([]bool, len(batch))
	for i, r := range batch {
		dst := filepath.Join(in, "doc-"+strconv.Itoa(i)+r.ext)
		if converter.CopyFile(r.src, dst) == nil && w.chown(dst) == nil {
			staged[i] = true
		}
	}
	return staged, nil
}

func (w *warm) chown(p string) error {
	if w.owner < 0 || w.owner == os.Geteuid() {
		return nil
	}
	return os.Lchown(p, w.owner, w.owner)
}

// call hands batch directory name to the script and waits for its answer, at most the time limit
// of one run. It reports whether the call succeeded and the converter still lives.
func (w *warm) call(name string) bool {
	if _, err := fmt.Fprintln(w.stdin, name); err != nil {
		return false
	}
	got := make(chan string, 1)
	go func() {
		if w.replies.Scan() {
			got <- w.replies.Text()
		} else {
			got <- ""
		}
	}()
	t := time.NewTimer(w.lim.Timeout)
	defer t.Stop()
	select {
	case line := <-got:
		return line == name+" 0"
	case <-t.C:
		// Too slow: kill the sandbox; the scanner's goroutine ends with the pipe.
		w.proc.Stop()
		return false
	case <-w.proc.Done():
		return false
	}
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

// checkProfile reports whether the profile still looks as conversions leave it: every hardening
// setting still in registrymodifications.xcu, and no file that was not there once the profile
// was made where code is kept ([holdsCode]). A document that managed to change the profile —
// undo a hardening setting, plant a macro library or an extension — fails this, and the batch
// it was found after is discarded and the converter retired.
func (w *warm) checkProfile() (bool, string) {
	dir := filepath.Join(w.dir, "profile")
	reg, err := os.ReadFile(filepath.Join(dir, "user", "registrymodifications.xcu"))
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
