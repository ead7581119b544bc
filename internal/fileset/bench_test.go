package fileset

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/store/drivertest"
)

var (
	benchRequests = flag.Int("fileset.requests", 10000, "requests of BenchmarkFileset")
	benchFileSize = flag.Int("fileset.filesize", 32<<10, "about the size of each file of BenchmarkFileset")
	benchHosts    = flag.Int("fileset.hosts", 200, "loopback hosts BenchmarkFileset serves the files from")
	benchDelay    = flag.Duration("fileset.hostdelay", 100*time.Millisecond, "BenchmarkFileset's --host-delay")
	benchRuns     = flag.Int("fileset.runs", 2, "runs of BenchmarkFileset's command: the second's successes are success-existing")
)

// BenchmarkFileset runs `sluice fileset --requests` (the real binary) over the realistic mix
// of TestMixTwice at 10,000 requests (-fileset.requests) against the fakes, then again (every
// success becomes success-existing), and reports requests/s, MB/s and the process's peak RSS.
// The files are served from -fileset.hosts loopback addresses (127.0.1.1, …) and the command
// runs politely, with --host-delay -fileset.hostdelay: the benchmark fails if two downloads'
// starts on one host came closer than that.
// The baseline, measured in the same run, is a plain Go client doing the same HTTP work with
// 16 goroutines and no engine: landing page, API, every file fetched and its md5 checked.
//
//	go test -run XXX -bench BenchmarkFileset -benchtime 1x ./internal/fileset/
func BenchmarkFileset(b *testing.B) {
	mixFileSize = *benchFileSize
	bin := sluiceBinary(b)
	for _, driver := range []string{"sqlite", "postgres"} {
		b.Run(driver, func(b *testing.B) {
			var dbArgs []string
			if driver == "postgres" {
				url := os.Getenv("SLUICE_TEST_DATABASE_URL")
				if url == "" {
					b.Skip("set SLUICE_TEST_DATABASE_URL")
				}
				schema := drivertest.Schema(b)
				b.Cleanup(func() { drivertest.DropSchema(b, url, schema) })
				dbArgs = []string{"--database", url + "&sluice_schema=" + schema}
			}
			for b.Loop() {
				f := newFakes(b)
				fh := f.spreadFiles(b, *benchHosts)
				var lines []string
				var reqs []Request
				for i := range *benchRequests {
					r, _, _ := mixRequest(f, i)
					reqs = append(reqs, r)
					line, _ := json.Marshal(r)
					lines = append(lines, string(line))
				}
				path := filepath.Join(b.TempDir(), "requests.jsonl")
				if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
					b.Fatal(err)
				}
				base := benchBaseline(b, f, reqs)
				fh.reset() // the baseline is not polite
				data := b.TempDir()
				for run := 1; run <= *benchRuns; run++ {
					before := f.served
					// The same command again: the first job has ended, so it is a new run.
					args := append([]string{"fileset", "--data", data, "--requests", path, "--results", filepath.Join(data, fmt.Sprintf("r%d.jsonl", run)),
						"--platform", "zenodo=" + baseOf(f.zenodo), "--egress-allow", "localhost,127.0.0.0/8", "--host-delay", benchDelay.String()}, dbArgs...)
					start := time.Now()
					out, err := runBench(bin, args)
					if err != nil {
						b.Fatalf("run %d: %v\n%s", run, err, out.text)
					}
					took := time.Since(start)
					f.mu.Lock()
					bytes := f.served - before
					f.mu.Unlock()
					rss := out.rss
					gap, gets, hosts := fh.minGap()
					b.Logf("run %d: %d file GETs so far on %d hosts, least gap between two on one host %s (--host-delay %s)", run, gets, hosts, gap, *benchDelay)
					if gap >= 0 && gap < *benchDelay {
						b.Errorf("two downloads from one host started %s apart: want at least --host-delay %s", gap, *benchDelay)
					}
					b.Logf("run %d: %d requests in %s: %.0f requests/s, %.1f MB/s (%d MB), peak RSS %d MB, CPU %s; baseline %.0f requests/s, %.1f MB/s; %s",
						run, len(reqs), took.Round(time.Millisecond), float64(len(reqs))/took.Seconds(), float64(bytes)/1e6/took.Seconds(),
						bytes/1e6, rss>>20, out.cpu.Round(time.Millisecond), base.rps, base.mbps, strings.TrimSpace(lastLine(out.text)))
					if run == 1 {
						b.ReportMetric(float64(len(reqs))/took.Seconds(), "requests/s")
						b.ReportMetric(float64(bytes)/1e6/took.Seconds(), "MB/s")
						b.ReportMetric(float64(rss>>20), "peak-RSS-MB")
						b.ReportMetric(base.rps, "baseline-requests/s")
					} else {
						b.ReportMetric(float64(len(reqs))/took.Seconds(), "rerun-requests/s")
					}
				}
			}
		})
	}
}

type benchOut struct {
	text string
	rss  int64 // bytes
	cpu  time.Duration
}

// runBench runs the binary and returns its output, its CPU time and its peak RSS, read from
// /proc (VmHWM) while it runs: wait4's ru_maxrss would report this test process's size, which
// the child inherits at fork and Linux records as its maximum at exec.
func runBench(bin string, args []string) (benchOut, error) {
	cmd := exec.Command(bin, args...)
	var buf strings.Builder
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		return benchOut{}, err
	}
	var hwm atomic.Int64
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			if kb := vmHWM(cmd.Process.Pid); kb > hwm.Load() {
				hwm.Store(kb)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	err := cmd.Wait()
	close(done)
	out := benchOut{text: buf.String(), rss: hwm.Load() << 10}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		out.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return out, err
}

// vmHWM returns a process's peak resident set size in KiB, or 0.
func vmHWM(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), &kb)
			return kb
		}
	}
	return 0
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndex(s, "\n")+1:]
}

type baseline struct{ rps, mbps float64 }

// benchBaseline does the requests' HTTP work with a plain client: 16 goroutines, the landing
// page, the Zenodo API, every file with its md5 checked.
func benchBaseline(b *testing.B, f *fakes, reqs []Request) baseline {
	client := &http.Client{Timeout: 30 * time.Second}
	get := func(u string) ([]byte, int, error) {
		resp, err := client.Get(u)
		if err != nil {
			return nil, 0, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return body, resp.StatusCode, err
	}
	work := make(chan Request)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var total int64
	start := time.Now()
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range work {
				if _, code, err := get(r.BaseURL); err != nil || code != 200 {
					continue
				}
				id := r.BaseURL[strings.LastIndex(r.BaseURL, "/")+1:]
				body, code, err := get(baseOf(f.zenodo) + "/api/records/" + id)
				if err != nil || code != 200 {
					continue
				}
				var rec struct {
					Files []struct {
						Checksum string
						Links    struct{ Self string }
					}
				}
				if json.Unmarshal(body, &rec) != nil || len(rec.Files) > 200 {
					continue
				}
				for _, fl := range rec.Files {
					data, _, err := get(fl.Links.Self)
					if err != nil {
						continue
					}
					sum := md5.Sum(data)
					_ = fl.Checksum == "md5:"+hex.EncodeToString(sum[:])
					mu.Lock()
					total += int64(len(data))
					mu.Unlock()
				}
			}
		}()
	}
	for _, r := range reqs {
		work <- r
	}
	close(work)
	wg.Wait()
	took := time.Since(start).Seconds()
	return baseline{rps: float64(len(reqs)) / took, mbps: float64(total) / 1e6 / took}
}
