// Package sandbox runs converters as hostile code. Sluice's users ingest documents they did not
// write, and a converter (Chromium, LibreOffice, poppler, tesseract, vips, msgconvert) parsing
// such a document is the one place where the document's author gets to run code: a linked image,
// an iframe, a script, a parser bug. So each run of a converter gets, through bubblewrap (bwrap):
//
//   - no network: a network namespace of its own, with nothing in it but a loopback that is down;
//   - a filesystem view of its own: /usr read-only, a few files of /etc it needs (fonts, the
//     dynamic linker's cache, LibreOffice's registry; never passwd, hosts, or Sluice's data dir),
//     a private /tmp, its scratch directory read-write and its inputs read-only — nothing else;
//   - no privileges: an unprivileged uid (one of its own when Sluice runs as root, else
//     Sluice's in a user namespace of its own), no capabilities, its own pid namespace with its
//     own /proc (it sees no process but its own), its own ipc and uts namespaces, a new session
//     (no terminal injection);
//   - limits: CPU seconds, address space and file size through rlimits (prlimit), and the time
//     limit its caller sets.
//
// When the kernel refuses the namespaces or bwrap is missing, [Check] says why and every
// sandboxed run fails with an [*UnavailableError] naming the reason — never a silent unsandboxed
// run. Setting SLUICE_SANDBOX=off (or [SetMode]) runs converters unsandboxed, for machines that
// cannot have namespaces and documents that are trusted; `sluice doctor` reports the mode.
package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Mode says whether converters run sandboxed.
type Mode string

const (
	// On runs every converter in the sandbox and fails a run when the sandbox is unavailable.
	On Mode = "on"
	// Off runs converters unsandboxed (SLUICE_SANDBOX=off). Only for trusted documents.
	Off Mode = "off"
)

var (
	modeMu sync.RWMutex
	mode   = modeFromEnv()
)

func modeFromEnv() Mode {
	if strings.EqualFold(os.Getenv("SLUICE_SANDBOX"), "off") {
		return Off
	}
	return On
}

// CurrentMode returns the mode in force.
func CurrentMode() Mode {
	modeMu.RLock()
	defer modeMu.RUnlock()
	return mode
}

// SetMode sets the mode for this process and returns the previous one.
func SetMode(m Mode) Mode {
	modeMu.Lock()
	defer modeMu.Unlock()
	old := mode
	mode = m
	return old
}

// ParseMode parses "on" or "off".
func ParseMode(s string) (Mode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "on":
		return On, nil
	case "off":
		return Off, nil
	}
	return "", fmt.Errorf("sandbox mode %q: want on or off", s)
}

// Spec is what one sandboxed run may see and use.
type Spec struct {
	// Scratch is the directory the tool reads and writes, bound read-write at the same path
	// and used as its working directory. Required.
	Scratch string
	// CPU is the CPU-time limit in seconds (RLIMIT_CPU); zero means none.
	CPU int64
	// Memory is the address-space limit in bytes (RLIMIT_AS); zero or negative means none.
	Memory int64
	// FileSize is the largest file the tool may write, in bytes (RLIMIT_FSIZE); zero means
	// [DefaultFileSize].
	FileSize int64
	// TmpSize caps the private /tmp (a tmpfs), in bytes; zero means [DefaultTmpSize].
	TmpSize int64
	// Env is the tool's complete environment.
	Env []string
	// ExtraFiles are open files the tool inherits as descriptors 3, 4, …
	ExtraFiles []*os.File
	// Tools are more programs the tool runs (a script run by /bin/sh names its converter
	// here), given as absolute paths; one outside /usr is bound read-only, as the tool is.
	Tools []string
}

// Defaults of [Spec].
const (
	DefaultFileSize = 4 << 30
	DefaultTmpSize  = 512 << 20
)

// UnavailableError is returned for a sandboxed run when the sandbox cannot be had.
type UnavailableError struct{ Reason string }

func (e *UnavailableError) Error() string {
	return "converter sandbox unavailable: " + e.Reason +
		" (sluice doctor explains; SLUICE_SANDBOX=off runs converters unsandboxed, for trusted documents only)"
}

// StartError returns the error for a sandboxed command ([Command]) that did not start: an
// [*UnavailableError] when the kernel refused the pid (and, for another user than root, user)
// namespace the command is started in, else err.
func StartError(err error) error {
	for _, errno := range []syscall.Errno{syscall.EPERM, syscall.EINVAL, syscall.ENOSPC, syscall.EUSERS} {
		if errors.Is(err, errno) {
			return &UnavailableError{Reason: "the kernel refused the sandbox's namespaces: " + err.Error()}
		}
	}
	return err
}

// Status is what [Check] found, for `sluice doctor`.
type Status struct {
	Mode      Mode   `json:"mode"`
	Available bool   `json:"available"`
	Bwrap     string `json:"bwrap,omitempty"`
	Version   string `json:"version,omitempty"`
	// UID is the uid converters run as, outside their user namespace: as root, the first of
	// UIDs, one for each run at a time.
	UID  int `json:"uid"`
	UIDs int `json:"uids"`
	// Reason says why the sandbox is unavailable.
	Reason string `json:"reason,omitempty"`
}

var (
	checkOnce sync.Once
	checked   Status
)

// Check probes the sandbox once per process: bwrap installed, and the kernel granting the user,
// network, mount and pid namespaces it asks for.
func Check() Status {
	checkOnce.Do(func() { checked = probe() })
	st := checked
	st.Mode = CurrentMode()
	return st
}

func probe() Status {
	st := Status{UID: os.Geteuid(), UIDs: 1}
	if st.UID == 0 {
		st.UID, st.UIDs = firstUID, uidCount
	}
	p, err := exec.LookPath("bwrap")
	if err != nil {
		st.Reason = "bubblewrap is not installed: apt-get install bubblewrap"
		return st
	}
	st.Bwrap = p
	if out, err := exec.Command(p, "--version").Output(); err == nil {
		st.Version = strings.TrimSpace(string(out))
	}
	dir, err := os.MkdirTemp("", "sluice-sandbox-probe-")
	if err != nil {
		st.Reason = err.Error()
		return st
	}
	defer os.RemoveAll(dir)
	var stderr bytes.Buffer
	cmd, cleanup, err := Command("/bin/sh", []string{"-c", "exit 0"}, Spec{Scratch: dir, Env: []string{"PATH=/usr/bin:/bin"}})
	if err != nil {
		st.Reason = err.Error()
		return st
	}
	defer cleanup()
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		var ue *UnavailableError
		if errors.As(StartError(err), &ue) {
			st.Reason = ue.Reason
		} else {
			st.Reason = err.Error()
		}
		return st
	}
	t := time.AfterFunc(20*time.Second, func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	defer t.Stop()
	if err := cmd.Wait(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		st.Reason = "the kernel refused the sandbox's namespaces: " + msg
		return st
	}
	st.Available = true
	return st
}

// etcFiles are the files and directories of /etc a converter may see: the dynamic linker's
// configuration, fonts, and the configuration LibreOffice, Chromium, ImageMagick and perl read.
// Never passwd, group, shadow, hosts, resolv.conf or anything naming this machine.
var etcFiles = []string{
	"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/fonts", "/etc/libreoffice",
	"/etc/chromium", "/etc/chromium.d", "/etc/alternatives", "/etc/perl", "/etc/ImageMagick-6",
	"/etc/mime.types", "/etc/magic", "/etc/localtime", "/etc/gtk-3.0",
}

// cacheDirs are the system's caches a converter may read: fontconfig's, which describes the fonts
// under /usr the sandbox shows anyway. Without it every run in a new HOME (a cold conversion, a
// warm converter's start, each Chromium and poppler run) scans all the fonts again and writes a
// cache of its own: 110 MB of fonts read, and 224 KB written, per run on Debian with the CJK fonts.
var cacheDirs = []string{"/var/cache/fontconfig"}

// Command returns the command that runs path with args inside the sandbox described by spec, and
// a cleanup to call once it has finished. The caller sets its stdio and starts it; the command is
// the leader of a new process group and the init of a new pid namespace, so killing it — or
// Sluice's death, through its parent-death signal — kills the whole sandbox at once.
//
// When Sluice runs as root, bwrap runs as root without a user namespace (it needs none to make
// the others) and starts the tool through setpriv as a uid no other run holds, with no
// capabilities and no_new_privs; spec.Scratch is handed to that uid first, and the cleanup
// returns the uid. Otherwise bwrap makes a user namespace and the tool keeps Sluice's uid,
// which has nothing to drop.
func Command(path string, args []string, spec Spec) (*exec.Cmd, func(), error) {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		return nil, nil, &UnavailableError{Reason: "bubblewrap is not installed: apt-get install bubblewrap"}
	}
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		return nil, nil, &UnavailableError{Reason: "prlimit is not installed: apt-get install util-linux"}
	}
	if spec.Scratch == "" {
		return nil, nil, errors.New("sandbox: no scratch directory")
	}
	scratch, err := filepath.Abs(spec.Scratch)
	if err != nil {
		return nil, nil, err
	}
	uid := os.Geteuid()
	asRoot := uid == 0
	release := func() {}
	if asRoot {
		if uid, release, err = holdUID(); err != nil {
			return nil, nil, err
		}
	}
	// The caller's files come first, so the tool finds them at 3, 4, …; bwrap closes the
	// ones that follow, which carry its own data.
	files := append([]*os.File(nil), spec.ExtraFiles...)
	cleanup := func() {
		for _, f := range files[len(spec.ExtraFiles):] {
			f.Close()
		}
		// The run's pid namespace died with its init, which the caller waited for: nothing
		// runs as uid any more.
		release()
	}
	ok := false
	defer func() {
		if !ok {
			cleanup()
		}
	}()
	var a []string
	if asRoot {
		if err := chownTree(scratch, uid); err != nil {
			return nil, nil, fmt.Errorf("sandbox: hand the scratch dir to uid %d: %w", uid, err)
		}
		a = append(a, "--unshare-ipc", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try", "--unshare-pid")
	} else {
		a = append(a, "--unshare-all", "--cap-drop", "ALL")
	}
	// The tool is the init of a pid namespace of bwrap's making, nested in the one the command
	// below is the init of (see Cloneflags), and bwrap mounts that namespace's own /proc: the
	// tool sees its own processes and nothing else — not bwrap's monitor (which lives in the
	// host's network and mount namespaces), not other runs, not the host. Without
	// --unshare-pid bwrap binds the host's /proc instead. --as-pid-1 spares the reaper bwrap
	// would otherwise run as that init, whose start and teardown cost more than the namespace
	// (30-40 ms a run on a loaded 2-core machine); the tool reaps nothing it does not wait for,
	// and what it leaves dies with the run. As an init the tool ignores the signals it has no
	// handler for that the kernel's limits send it: a write past RLIMIT_FSIZE fails with EFBIG
	// instead of SIGXFSZ, and RLIMIT_CPU ends it with the SIGKILL of its hard limit (prlimit
	// sets both), which no process ignores.
	a = append(a, "--as-pid-1")
	a = append(a, "--die-with-parent", "--new-session", "--hostname", "sandbox", "--ro-bind", "/usr", "/usr")
	for _, d := range []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(d); err == nil {
				a = append(a, "--symlink", target, d)
			}
		case fi.IsDir():
			a = append(a, "--ro-bind", d, d)
		}
	}
	a = append(a, "--perms", "0755", "--dir", "/etc")
	for _, f := range etcFiles {
		a = append(a, "--ro-bind-try", f, f)
	}
	// The synthetic passwd and group name only the sandbox's user: tools that look themselves
	// up (LibreOffice) find an answer, and nothing of the host's accounts shows.
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/usr/sbin/nologin\nsandbox:x:%d:%d:sandbox:%s:/usr/sbin/nologin\n", uid, uid, scratch)
	group := fmt.Sprintf("root:x:0:\nsandbox:x:%d:\n", uid)
	for _, f := range [][2]string{{passwd, "/etc/passwd"}, {group, "/etc/group"}} {
		df, err := dataFD(f[0])
		if err != nil {
			return nil, nil, err
		}
		files = append(files, df)
		a = append(a, "--perms", "0644", "--ro-bind-data", strconv.Itoa(2+len(files)), f[1])
	}
	tmpSize := spec.TmpSize
	if tmpSize <= 0 {
		tmpSize = DefaultTmpSize
	}
	a = append(a, "--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", strconv.FormatInt(tmpSize, 10), "--tmpfs", "/tmp")
	// The ancestors of what is bound below exist in the sandbox as empty directories that the
	// tool may walk through (bwrap would make them 0700, closed to the tool's uid).
	made := map[string]bool{"/": true, "/tmp": true, "/usr": true, "/etc": true}
	parents := func(p string) {
		var ds []string
		for d := filepath.Dir(p); !made[d] && d != "."; d = filepath.Dir(d) {
			ds = append(ds, d)
		}
		for i := len(ds) - 1; i >= 0; i-- {
			made[ds[i]] = true
			a = append(a, "--perms", "0755", "--dir", ds[i])
		}
	}
	for _, d := range cacheDirs {
		parents(d)
		a = append(a, "--ro-bind-try", d, d)
	}
	parents(scratch)
	a = append(a, "--bind", scratch, scratch)
	// A tool outside /usr (a test's fake, a hand-built converter) is bound read-only too.
	if real, err := filepath.EvalSymlinks(path); err == nil && !within("/usr", real) && !within(scratch, real) {
		parents(real)
		a = append(a, "--ro-bind", real, real)
		path = real
	}
	for _, t := range spec.Tools {
		if real, err := filepath.EvalSymlinks(t); err == nil && !within("/usr", real) && !within(scratch, real) {
			parents(real)
			a = append(a, "--ro-bind", real, real)
		}
	}
	a = append(a, "--chdir", scratch, "--clearenv")
	for _, kv := range spec.Env {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			a = append(a, "--setenv", k, v)
		}
	}
	a = append(a, "--")
	if asRoot {
		a = append(a, "/usr/bin/setpriv", "--reuid="+strconv.Itoa(uid), "--regid="+strconv.Itoa(uid), "--clear-groups",
			"--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--")
	}
	a = append(a, path)
	a = append(a, args...)

	lim := []string{"--core=0"}
	if spec.CPU > 0 {
		lim = append(lim, "--cpu="+strconv.FormatInt(spec.CPU, 10))
	}
	if spec.Memory > 0 {
		lim = append(lim, "--as="+strconv.FormatInt(spec.Memory, 10))
	}
	fs := spec.FileSize
	if fs <= 0 {
		fs = DefaultFileSize
	}
	lim = append(lim, "--fsize="+strconv.FormatInt(fs, 10), "--", bwrap)
	cmd := exec.Command(prlimit, append(lim, a...)...)
	cmd.ExtraFiles = files
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// The command (prlimit, then bwrap's monitor) is the init of a pid namespace of its own, so
	// that its death — by the parent-death signal when Sluice dies, or by Sluice's kill — takes
	// everything in the sandbox with it: the kernel kills every process of a namespace whose init
	// exits. bwrap's --unshare-pid and --die-with-parent alone left a window (issue #16): the
	// init bwrap makes for its namespace arms its parent-death signal only once the sandbox is
	// set up (bwrap 0.8's do_init, after the mounts and --block-fd), so a monitor killed during
	// that setup — tens of milliseconds a run on a loaded machine — left the sandbox to run its
	// tool re-parented to pid 1, in a session of its own where no process-group kill reaches.
	//
	// As another user the namespace needs a user namespace of its own, mapping only Sluice's own
	// ids; bwrap runs in it with no capabilities (execve drops them for a non-zero uid). Where
	// the kernel lets only bwrap make user namespaces (Ubuntu 24.04's AppArmor rule), the
	// command starts without this namespace, with the window, and the records are all that
	// catch what it leaves.
	//
	// One window stays: Go's check that the parent is still alive after arming the signal cannot
	// see the parent from inside the new namespace (getppid is 0; its self-kill is ignored by an
	// init), so a Sluice killed within microseconds of the fork leaves this init running; the
	// records of internal/subprocess reap it when an engine opens the data dir again.
	if asRoot || userNamespaceOK() {
		outerNamespace(cmd.SysProcAttr)
	}
	ok = true
	return cmd, cleanup, nil
}

// outerNamespace makes attr start its command as the init of a new pid namespace — for
// another user than root, in a new user namespace mapping only its own uid and gid.
func outerNamespace(attr *syscall.SysProcAttr) {
	attr.Cloneflags = syscall.CLONE_NEWPID
	if os.Geteuid() != 0 {
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getuid(), HostID: os.Getuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getgid(), HostID: os.Getgid(), Size: 1}}
	}
}

var (
	userNSOnce sync.Once
	userNSOK   bool
)

// userNamespaceOK reports, probing once per process, whether this process (not root) may start
// a command in the namespaces of [outerNamespace].
func userNamespaceOK() bool {
	userNSOnce.Do(func() {
		cmd := exec.Command("/bin/true")
		cmd.SysProcAttr = &syscall.SysProcAttr{}
		outerNamespace(cmd.SysProcAttr)
		userNSOK = cmd.Run() == nil
	})
	return userNSOK
}

// Sanitize removes from dir, after a sandboxed run, everything but regular files and
// directories: a tool that turned its output into a symlink to a host file, or a FIFO, must not
// make Sluice read that file or hang.
func Sanitize(dir string) error {
	return filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		if t := d.Type(); t&(os.ModeSymlink|os.ModeNamedPipe|os.ModeSocket|os.ModeDevice|os.ModeCharDevice|os.ModeIrregular) != 0 {
			return os.Remove(p)
		}
		return nil
	})
}

// dataFD returns a readable file holding data (a memfd), for bwrap's --ro-bind-data.
func dataFD(data string) (*os.File, error) {
	fd, err := unix.MemfdCreate("sluice-sandbox", 0)
	if err != nil {
		return nil, fmt.Errorf("sandbox: memfd: %w", err)
	}
	f := os.NewFile(uintptr(fd), "sluice-sandbox-data")
	if _, err := io.WriteString(f, data); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// chownTree hands dir and everything in it to uid (not following symlinks).
func chownTree(dir string, uid int) error {
	return filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
}
