package subprocess

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Records keeps one small file per running tool in a directory (an engine's
// <data dir>/converters), so that the next engine to open that data dir after a SIGKILL finds
// the tools the dead process left running and kills them ([Records.Reap]). It is the safety net
// behind the parent-death signal and the sandbox's pid namespace, which kill a dead Sluice's
// converters at once: it catches what those miss (an unsandboxed tool's grandchildren, a kill
// within microseconds of a fork).
//
// A record names the tool's process by its pid and its start time (field 22 of /proc/PID/stat,
// in clock ticks since boot), so a pid the kernel has since given to another process is never
// killed; and the process that started it the same way, so a live process's tools are left
// alone. Records are not synced: they only need to survive the death of the process that wrote
// them, which the page cache does, and a machine that loses power loses its tools too.
//
// A Records is safe for concurrent use. The zero value and nil record nothing.
type Records struct {
	dir   string
	owner procStat
}

// OpenRecords returns the records kept in dir, creating it.
func OpenRecords(dir string) (*Records, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open converter records: %w", err)
	}
	self, err := readProcStat(os.Getpid())
	if err != nil {
		return nil, fmt.Errorf("open converter records: %w", err)
	}
	return &Records{dir: dir, owner: self}, nil
}

// record is one running tool, as written to its file.
type record struct {
	PID        int    `json:"pid"`
	Start      uint64 `json:"start"`
	PGID       int    `json:"pgid"`
	SID        int    `json:"sid"`
	Tool       string `json:"tool"`
	OwnerPID   int    `json:"owner_pid"`
	OwnerStart uint64 `json:"owner_start"`
}

// add records the tool just started as pid and returns the function that forgets it, to call
// once the tool and its process group are gone. It records nothing (and returns a no-op) when
// r is nil or the process is already gone.
func (r *Records) add(pid int, tool string) func() {
	if r == nil || r.dir == "" {
		return func() {}
	}
	st, err := readProcStat(pid)
	if err != nil {
		return func() {}
	}
	rec := record{PID: pid, Start: st.start, PGID: st.pgid, SID: st.sid, Tool: filepath.Base(tool),
		OwnerPID: r.owner.pid, OwnerStart: r.owner.start}
	b, _ := json.Marshal(rec)
	name := filepath.Join(r.dir, strconv.Itoa(pid)+"-"+strconv.FormatUint(st.start, 10)+".json")
	if err := os.WriteFile(name, b, 0o600); err != nil {
		return func() {}
	}
	return func() { _ = os.Remove(name) }
}

// Reap kills the tools recorded by processes that are gone — each recorded tool still running
// (same pid, same start time) with its process group, and, when the tool itself is gone, the
// members of its process group it left behind — logs each, and deletes their records. Records
// of a live process are kept. It returns the number of processes killed.
func (r *Records) Reap(log *slog.Logger) (int, error) {
	if r == nil || r.dir == "" {
		return 0, nil
	}
	entries, err := os.ReadDir(r.dir)
	if err != nil {
		return 0, fmt.Errorf("reap converters: %w", err)
	}
	var procs []procStat // the process table, read once when a record needs it
	killed := 0
	for _, e := range entries {
		name := filepath.Join(r.dir, e.Name())
		b, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		var rec record
		if err := json.Unmarshal(b, &rec); err != nil || rec.PID <= 0 || rec.PGID <= 0 {
			_ = os.Remove(name) // torn by a crash mid-write: nothing was started under it yet
			continue
		}
		if alive(rec.OwnerPID, rec.OwnerStart) {
			continue // its process runs (another process of this data dir, or this one)
		}
		if procs == nil {
			procs = processTable()
		}
		pids := leftovers(rec, procs)
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if len(pids) > 0 {
			// The group as a whole too, for a member that forked after the scan.
			_ = syscall.Kill(-rec.PGID, syscall.SIGKILL)
			killed += len(pids)
			log.Warn("killed converter left running by a killed process", "tool", rec.Tool, "pid", rec.PID,
				"pgid", rec.PGID, "processes", len(pids), "owner_pid", rec.OwnerPID)
		}
		_ = os.Remove(name)
	}
	return killed, nil
}

// leftovers returns the live processes of rec's process group that rec's tool left: the tool
// itself if it runs (same start time), and the group's members. The group's leader is the tool,
// or the guard started just before it (startGuard); a process holding the group's number that
// started after the tool leads another group: while any member of rec's group lived, the kernel
// could not give its number to a new process.
func leftovers(rec record, procs []procStat) []int {
	var pids []int
	for _, p := range procs {
		if p.pid == rec.PGID && p.start > rec.Start && p.state != 'Z' {
			return nil // the number was reused: rec's group is gone
		}
	}
	for _, p := range procs {
		if p.state == 'Z' || p.pgid != rec.PGID || p.start < rec.Start || p.sid != rec.SID {
			continue
		}
		pids = append(pids, p.pid)
	}
	return pids
}

// WithRecords returns a context under which [Run] records the tools it starts in r.
func WithRecords(ctx context.Context, r *Records) context.Context {
	return context.WithValue(ctx, recordsKey{}, r)
}

type recordsKey struct{}

func recordsFrom(ctx context.Context) *Records {
	r, _ := ctx.Value(recordsKey{}).(*Records)
	return r
}

// procStat is what Sluice reads of a process's /proc/PID/stat.
type procStat struct {
	pid, pgid, sid int
	state          byte
	start          uint64
}

func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseProcStat(pid, string(b))
}

// parseProcStat parses a /proc/PID/stat line. The command name (field 2) may hold spaces and
// parentheses, so the fields are counted from its last ')'.
func parseProcStat(pid int, s string) (procStat, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, errors.New("proc stat: no command name")
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state), so field n is f[n-3]: pgrp 5, session 6, starttime 22.
	if len(f) < 20 || len(f[0]) != 1 {
		return procStat{}, errors.New("proc stat: too few fields")
	}
	pgid, err1 := strconv.Atoi(f[2])
	sid, err2 := strconv.Atoi(f[3])
	start, err3 := strconv.ParseUint(f[19], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return procStat{}, fmt.Errorf("proc stat: %w", err)
	}
	return procStat{pid: pid, pgid: pgid, sid: sid, state: f[0][0], start: start}, nil
}

// alive reports whether process pid runs and started at start (not a zombie, not a reused pid).
func alive(pid int, start uint64) bool {
	st, err := readProcStat(pid)
	return err == nil && st.start == start && st.state != 'Z'
}

// processTable reads every process's stat.
func processTable() []procStat {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []procStat
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readProcStat(pid); err == nil {
			out = append(out, st)
		}
	}
	return out
}
