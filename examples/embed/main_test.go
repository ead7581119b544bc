package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestRun runs the sample program over three files, one of them not text, and runs it again
// on the same data directory: the job is found by its key, with the same results.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	names := writeFiles(t, dir, map[string]string{
		"a.txt": "the cat and the hat; the cat sat",
		"b.txt": "Sluice sluice SLUICE, gate",
		"c.bin": "caf\xe9 au lait",
	})
	want := "a.txt: the cat and\nb.txt: sluice gate\nc.bin: error: not UTF-8 text\njob 1 complete\n"
	data := filepath.Join(dir, "data")
	for round := range 2 {
		var out bytes.Buffer
		if err := run(t.Context(), &out, io.Discard, data, "", names); err != nil {
			t.Fatal(err)
		}
		if out.String() != want {
			t.Errorf("run %d printed\n%s\nwant\n%s", round+1, out.String(), want)
		}
	}
}

// TestKilledMidJob SIGKILLs the built program once its job runs, then runs it again on the same
// data directory: it finds its job by its key, finishes it, and prints what a run never killed
// prints.
func TestKilledMidJob(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the program")
	}
	dir := t.TempDir()
	files := map[string]string{}
	for i := range 300 {
		files[fmt.Sprintf("f%03d.txt", i)] = strings.Repeat(fmt.Sprintf("w%d ", i%7), i%11+1) + "end"
	}
	names := writeFiles(t, dir, files)
	var clean bytes.Buffer
	if err := run(t.Context(), &clean, io.Discard, filepath.Join(dir, "clean"), "", names); err != nil {
		t.Fatal(err)
	}

	bin := filepath.Join(dir, "embed")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	data := filepath.Join(dir, "crashed")
	cmd := exec.CommandContext(t.Context(), bin, append([]string{"-data", data}, names...)...)
	var out bytes.Buffer
	cmd.Stdout = &out
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	for sc.Scan() && sc.Text() != "job 1 started" {
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	if strings.Contains(out.String(), "complete") {
		t.Fatalf("the program finished before its kill:\n%s", out.String())
	}

	again := exec.CommandContext(t.Context(), bin, append([]string{"-data", data}, names...)...)
	got, err := again.Output()
	if err != nil {
		t.Fatalf("run after the kill: %v", err)
	}
	if string(got) != clean.String() {
		t.Errorf("after a kill the program printed\n%.500s\nwant\n%.500s", got, clean.String())
	}
}

func writeFiles(t *testing.T, dir string, files map[string]string) []string {
	t.Helper()
	var names []string
	for n, content := range files {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		names = append(names, p)
	}
	slices.Sort(names)
	return names
}
