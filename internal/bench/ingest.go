package bench

import (
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/detect"
	"github.com/sluice-project/sluice/internal/action/ingest"
	"github.com/sluice-project/sluice/internal/action/text"
	"github.com/sluice-project/sluice/internal/action/unpack"
	"github.com/sluice-project/sluice/internal/cli"
	"github.com/sluice-project/sluice/internal/node"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/sqliteuri"
	"github.com/sluice-project/sluice/internal/store"
)

// ingestResult is what `sluice-bench ingest` prints.
type ingestResult struct {
	Files           int     `json:"files"`
	Documents       int     `json:"documents"`
	Errors          int     `json:"errors"`
	Seconds         float64 `json:"seconds"`
	DocumentsPerSec float64 `json:"documents_per_sec"`
	PeakRSSMB       float64 `json:"peak_rss_mb"`
	// GoHeapPeakMB and SQLiteHeapPeakMB are the highest of the engine run's Go heap (its
	// objects) and of the memory SQLite's C allocator holds (0 unless built with -tags
	// memory.counters), sampled each second: the two parts of PeakRSSMB that can grow with
	// the job.
	GoHeapPeakMB     float64 `json:"go_heap_peak_mb"`
	SQLiteHeapPeakMB float64 `json:"sqlite_heap_peak_mb"`
	// SQLiteUsedPeakMB is the most SQLite itself counted as held (its memory statistics, which
	// sqliteuri.MemoryBudget keeps near the budget); SQLiteHeapPeakMB adds what its allocator
	// keeps around that.
	SQLiteUsedPeakMB float64 `json:"sqlite_used_peak_mb"`
	// DirectSeconds is the time of the same conversions without the engine; DirectIncludes says
	// exactly what that covers.
	DirectSeconds     float64 `json:"direct_seconds"`
	DirectIncludes    string  `json:"direct_includes"`
	EngineOverheadPct float64 `json:"engine_overhead_pct"`
	// JobSeconds is the time from the job's start to the commit that ended it, as this process's
	// engine reports it (node.Config.OnJobEnd), and JobCPUSeconds the process's CPU time over
	// the same span: Seconds adds the wait of `sluice ingest`'s follow loop, which looks at the
	// job every 200 ms, and stopping the node. JobOverheadPct and JobCPUOverheadPct are the
	// overheads over the direct conversions measured so.
	JobSeconds        float64 `json:"job_seconds"`
	JobCPUSeconds     float64 `json:"job_cpu_seconds"`
	JobOverheadPct    float64 `json:"job_overhead_pct"`
	JobCPUOverheadPct float64 `json:"job_cpu_overhead_pct"`
	Concurrency       int     `json:"direct_concurrency"`
	// The CPU time of the process over each part: unlike seconds, it barely moves when other
	// processes share the machine, so its overhead is the steadier figure.
	CPUSeconds       float64 `json:"cpu_seconds"`
	DirectCPUSeconds float64 `json:"direct_cpu_seconds"`
	CPUOverheadPct   float64 `json:"cpu_overhead_pct"`
	// Tasks is how many tasks the job made, LeasedTasks how many of them a worker ran (the
	// others ran inline, in the transactions that made them ready).
	Tasks       int `json:"tasks"`
	LeasedTasks int `json:"leased_tasks"`
	// InputBytes is the files' bytes; DataDirBytes the disk the data dir takes after the job
	// (allocated blocks, as du counts them, with the node closed so that SQLite's write-ahead
	// logs are checkpointed), DataDirRatio the one over the other, and DataDirFiles the bytes
	// of each file of more than 1 MB, by its path in the data dir.
	InputBytes   int64            `json:"input_bytes"`
	DataDirBytes int64            `json:"data_dir_bytes"`
	DataDirRatio float64          `json:"data_dir_ratio"`
	DataDirFiles map[string]int64 `json:"data_dir_files"`
}

func runIngest(ctx context.Context, e *env, args []string) error {
	fs, verbose := newFlags(e, "ingest", "ingest [--files N] [--size BYTES] [--no-direct] [--database URL] [--keep]", args)
	nfiles := fs.Int("files", 10000, "number of small text files in the zip")
	size := fs.Int("size", 0, "bytes of each text file (0: 90 to 330 bytes, varying)")
	keep := fs.Bool("keep", false, "keep the temporary directory")
	skipDirect := fs.Bool("no-direct", false, "skip the direct (engine-free) measurement")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the engine run to this file")
	memprofile := fs.String("memprofile", "", "write a profile of the engine run's allocations to this file")
	database := fs.String("database", "", "a postgres:// URL: ingest into PostgreSQL, in a schema made for the run and dropped after (default: SQLite in the temporary dir)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *nfiles <= 0 {
		return usagef("--files must be positive")
	}
	if *size < 0 {
		return usagef("--size must not be negative")
	}
	if *nfiles > zipFiles && !*skipDirect {
		return usagef("--files above %d needs --no-direct (the direct loop reads one zip)", zipFiles)
	}
	if *database != "" {
		if _, err := postgresURL(*database); err != nil {
			return err
		}
	}
	dir, err := os.MkdirTemp("", "sluice-bench-ingest-")
	if err != nil {
		return err
	}
	if *keep {
		fmt.Fprintln(e.stderr, "keeping", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	zipPaths, inputBytes, err := writeZips(dir, *nfiles, *size)
	if err != nil {
		return err
	}
	res := ingestResult{Files: *nfiles, InputBytes: inputBytes}
	if !*skipDirect {
		// First, in a process with nothing else in its heap: the direct loop must not pay for
		// the engine's memory (its collections scan it) nor the engine for the loop's.
		cpu0 := cpuTime()
		d, conc, err := directConvert(ctx, filepath.Join(dir, "direct"), zipPaths[0], *nfiles)
		if err != nil {
			return fmt.Errorf("direct conversions: %w", err)
		}
		res.DirectSeconds, res.Concurrency = d.Seconds(), conc
		res.DirectCPUSeconds = (cpuTime() - cpu0).Seconds()
		runtime.GC()
	}
	// jobEnd holds when the job ended and the CPU time then: the follow loop of cli.IngestFiles
	// sees the end up to 200 ms later (a tenth of the direct loop's time at 2,000 files).
	var jobEnd struct {
		sync.Mutex
		at  time.Time
		cpu time.Duration
	}
	cfg := node.Config{DataDir: filepath.Join(dir, "data"), Engine: true, Logger: logger(e, *verbose),
		OnJobEnd: func(int64, record.JobState) {
			at, cpu := time.Now(), cpuTime()
			jobEnd.Lock()
			if jobEnd.at.IsZero() {
				jobEnd.at, jobEnd.cpu = at, cpu
			}
			jobEnd.Unlock()
		}}
	if *database != "" {
		_, drop := useSchema(ctx, &cfg, *database, *keep, cfg.Logger)
		defer drop() // deferred first, so it runs after the node (and its pool) closed
	}
	n, err := node.Open(ctx, cfg)
	if err != nil {
		return err
	}
	closed := false
	defer func() {
		if !closed {
			n.Close()
		}
	}()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	peaks := startMemoryPeaks()
	start, cpu0 := time.Now(), cpuTime()
	final, err := cli.IngestFiles(ctx, n, zipPaths, map[string]any{"ocr": false, "split_by_page": false})
	if err != nil {
		return err
	}
	end, cpuEnd := time.Now(), cpuTime()
	res.Seconds = end.Sub(start).Seconds()
	res.CPUSeconds = (cpuEnd - cpu0).Seconds()
	jobEnd.Lock()
	if jobEnd.at.IsZero() { // not ended by this process's engine: the end as the follow loop saw it
		jobEnd.at, jobEnd.cpu = end, cpuEnd
	}
	res.JobSeconds, res.JobCPUSeconds = jobEnd.at.Sub(start).Seconds(), (jobEnd.cpu - cpu0).Seconds()
	jobEnd.Unlock()
	if *cpuprofile != "" {
		pprof.StopCPUProfile()
	}
	if *memprofile != "" {
		f, err := os.Create(*memprofile)
		if err != nil {
			return err
		}
		err = pprof.Lookup("allocs").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	res.PeakRSSMB = peakRSSMB()
	res.GoHeapPeakMB, res.SQLiteHeapPeakMB = peaks.end()
	_, sqlitePeak := sqliteuri.MemoryUsed()
	res.SQLiteUsedPeakMB = math.Round(float64(sqlitePeak)/(1<<20)*10) / 10
	if final.State != record.JobComplete {
		return fmt.Errorf("bench job ended %s: %s", final.State, final.Error)
	}
	if res.Documents, err = countOutputs(ctx, n.Store, final.ID, ingest.KindDocument); err != nil {
		return err
	}
	if res.Errors, err = countOutputs(ctx, n.Store, final.ID, ingest.KindError); err != nil {
		return err
	}
	if res.Tasks, res.LeasedTasks, err = countTasks(ctx, n, final.ID); err != nil {
		return err
	}
	closed = true
	if err := n.Close(); err != nil {
		return fmt.Errorf("close the node: %w", err)
	}
	if res.DataDirBytes, res.DataDirFiles, err = diskUsage(cfg.DataDir, 1<<20); err != nil {
		return err
	}
	res.DataDirRatio = math.Round(float64(res.DataDirBytes)/float64(res.InputBytes)*100) / 100
	res.DocumentsPerSec = float64(res.Documents) / res.Seconds
	if !*skipDirect {
		res.CPUOverheadPct = (res.CPUSeconds - res.DirectCPUSeconds) / res.DirectCPUSeconds * 100
		res.DirectIncludes = fmt.Sprintf("unpack of the zip (which records each small entry's content type, as detect finds it), then detect + text "+
			"(charset decode, PDF render, page-1 thumbnail) on each entry's bytes held in memory, %d at a time like the engine's text action, results kept in memory; "+
			"excludes blob and database writes, tasks, routing the PDF child and ingest, which the engine's seconds include; run first, in the same process", res.Concurrency)
		res.EngineOverheadPct = (res.Seconds - res.DirectSeconds) / res.DirectSeconds * 100
		res.JobOverheadPct = (res.JobSeconds - res.DirectSeconds) / res.DirectSeconds * 100
		res.JobCPUOverheadPct = (res.JobCPUSeconds - res.DirectCPUSeconds) / res.DirectCPUSeconds * 100
	}
	enc := json.NewEncoder(e.stdout)
	return enc.Encode(res)
}

// countTasks counts the job's tasks and those a worker leased: an inline task starts and ends at
// the same instant, in the transaction that made it ready.
func countTasks(ctx context.Context, n *node.Node, jobID int64) (all, leased int, err error) {
	var after int64
	for {
		page, err := n.Store.TaskListByJob(ctx, store.TaskListParams{JobID: jobID, AfterID: after, Limit: readBackPage})
		if err != nil {
			return 0, 0, err
		}
		for _, tk := range page {
			all++
			if !tk.FinishedAt.Equal(tk.StartedAt) {
				leased++
			}
			after = tk.ID
		}
		if len(page) < readBackPage {
			return all, leased, nil
		}
	}
}

// countOutputs counts the job's outputs of one kind (the documents, or the errors, of an
// ingest).
func countOutputs(ctx context.Context, s store.Store, jobID int64, kind string) (int, error) {
	const page = 10_000
	var all int
	var after int64
	for {
		outs, err := s.OutputList(ctx, store.OutputListParams{JobID: jobID, Kind: kind, AfterItem: after, Limit: page})
		if err != nil {
			return 0, err
		}
		all += len(outs)
		if len(outs) < page {
			return all, nil
		}
		after = outs[len(outs)-1].ItemID
	}
}

// zipFiles is the most files one bench zip holds: the unpack action's default max_entries. More
// files are written to more zips, ingested as one job.
const zipFiles = 100_000

// writeZips writes n small, distinct text files into zips of at most zipFiles each under dir,
// made one at a time (a million files are a gigabyte: none is kept), and returns the zips' paths
// and the files' bytes.
func writeZips(dir string, n, size int) ([]string, int64, error) {
	var paths []string
	var total int64
	for first := 0; first < n; first += zipFiles {
		path := filepath.Join(dir, "bench.zip")
		if n > zipFiles {
			path = filepath.Join(dir, fmt.Sprintf("bench-%02d.zip", first/zipFiles))
		}
		nb, err := writeZip(path, first, min(n, first+zipFiles), size)
		if err != nil {
			return nil, 0, err
		}
		paths, total = append(paths, path), total+nb
	}
	return paths, total, nil
}

// zipEntry returns file i of the bench, small and distinct (distinct, so the conversion cache
// does not make the benchmark trivial): size bytes, or 90 to 330 bytes when size is 0.
func zipEntry(i, size int) (name string, data []byte) {
	head := fmt.Sprintf("Bench document %d.\nThe quick brown fox jumps over the lazy dog %d times.\n", i, i)
	if size == 0 {
		data = []byte(head + strings.Repeat("lorem ipsum ", 5+i%20) + "\n")
	} else {
		// Words of a small vocabulary in an order of their own per file, in lines of about
		// 70 characters: prose-like text, which compresses as prose does.
		data = append(make([]byte, 0, size+16), head...)
		x, col := uint32(i)*2654435761+1, 0
		for len(data) < size {
			x ^= x << 13
			x ^= x >> 17
			x ^= x << 5
			w := benchWords[x%uint32(len(benchWords))]
			data = append(data, w...)
			col += len(w) + 1
			if col > 70 {
				data, col = append(data, '\n'), 0
			} else {
				data = append(data, ' ')
			}
		}
		data = append(data[:size-1], '\n')
	}
	return fmt.Sprintf("dir%02d/file-%06d.txt", i%50, i), data
}

// benchWords is the vocabulary of zipEntries' sized files.
var benchWords = strings.Fields(`the of and to in is that for it as was with be by on not he this are or his from at
which but have an they you were her she there been one all we their has would when if so no will more
document report file page river water stone market letter north summer number system between during
government against national public however different following important example general`)

// diskUsage returns the bytes the files under dir take on disk (allocated blocks), and those of
// each file of at least big bytes by its slash-separated path in dir.
func diskUsage(dir string, big int64) (int64, map[string]int64, error) {
	var total int64
	files := map[string]int64{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		n := fi.Size()
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			n = st.Blocks * 512
		}
		total += n
		if !d.IsDir() && n >= big {
			rel, _ := filepath.Rel(dir, p)
			files[filepath.ToSlash(rel)] = n
		}
		return nil
	})
	if err != nil {
		return 0, nil, fmt.Errorf("measure the data dir: %w", err)
	}
	return total, files, nil
}

// writeZip writes files first to end-1 of the bench into a zip at path and returns their bytes.
func writeZip(path string, first, end, size int) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 1<<20)
	zw := zip.NewWriter(bw)
	var total int64
	for i := first; i < end; i++ {
		name, data := zipEntry(i, size)
		w, err := zw.Create(name)
		if err != nil {
			return 0, err
		}
		if _, err := w.Write(data); err != nil {
			return 0, err
		}
		total += int64(len(data))
	}
	if err := zw.Close(); err != nil {
		return 0, err
	}
	if err := bw.Flush(); err != nil {
		return 0, err
	}
	return total, f.Close()
}

// directConvert runs the same conversions as the documents workflow does on the bench zip —
// unpack, then detect and text on every entry, as many at a time as the text action's default
// concurrency — without the engine, and returns the time taken.
func directConvert(ctx context.Context, tmp, zipPath string, want int) (time.Duration, int, error) {
	det := detect.New(detect.Config{})
	txt := text.New(&text.Renderer{})
	conc := txt.Spec().Concurrency
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return 0, 0, err
	}
	start := time.Now()
	zt := &action.Task{ID: 1, Attempt: 1, With: map[string]any{}, TempDir: tmp,
		Item:     action.Item{ID: 1, Name: "bench.zip", ContentType: "application/zip", Metadata: map[string]any{}, Options: map[string]any{}},
		OpenBlob: func(context.Context) (io.ReadCloser, error) { return os.Open(zipPath) },
		BlobPath: func(context.Context) (string, error) { return zipPath, nil },
	}
	var zo memOutput
	if err := unpack.New(unpack.Config{}).Run(ctx, zt, &zo); err != nil {
		return 0, 0, fmt.Errorf("unpack: %w", err)
	}
	if len(zo.children) != want {
		return 0, 0, fmt.Errorf("unpack: %d entries, want %d", len(zo.children), want)
	}
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	var errOnce sync.Once
	var firstErr error
	for i, c := range zo.children {
		if gctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := convertOne(gctx, det, txt, tmp, i, c); err != nil {
				errOnce.Do(func() { firstErr = err; cancel() })
			}
		}()
	}
	wg.Wait()
	return time.Since(start), conc, firstErr
}

// convertOne runs detect, then text, on entry i as the engine would, outside the engine.
func convertOne(ctx context.Context, det action.Action, txt action.Action, tmp string, i int, en memChild) error {
	td := filepath.Join(tmp, strconv.Itoa(i))
	if err := os.Mkdir(td, 0o700); err != nil {
		return err
	}
	defer os.RemoveAll(td)
	t := &action.Task{ID: int64(i + 1), Attempt: 1, With: map[string]any{}, TempDir: td,
		// The content type unpack recorded, as the engine's item has it: detect routes by it.
		Item: action.Item{ID: int64(i + 1), Name: en.name, Size: int64(len(en.blob)), ContentType: en.contentType,
			Metadata: map[string]any{}, Options: map[string]any{}},
		OpenBlob: func(context.Context) (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(en.blob)), nil
		},
	}
	var o memOutput
	if err := det.Run(ctx, t, &o); err != nil {
		return fmt.Errorf("detect %s: %w", en.name, err)
	}
	if len(o.events) != 1 || o.events[0] != "detected.text" {
		return fmt.Errorf("detect %s: routed %v, want detected.text", en.name, o.events)
	}
	t.Item.ContentType = o.contentType
	if err := txt.Run(ctx, t, &o); err != nil {
		return fmt.Errorf("text %s: %w", en.name, err)
	}
	if len(o.children) != 1 || o.children[0].text == nil {
		return fmt.Errorf("text %s: no child with text", en.name)
	}
	return nil
}

// memOutput is an in-memory [action.Output] for the direct measurement: it keeps what the
// actions produce, reading blobs fully as the engine would.
type memOutput struct {
	events      []string
	contentType string
	children    []memChild
	text        *string
}

type memChild struct {
	name        string
	contentType string
	blob, thumb []byte
	text        *string
}

func (o *memOutput) CreateChild(ctx context.Context, c action.Child) error {
	if c.BlobSHA256 != "" {
		return fmt.Errorf("child %q: the direct loop has no blob store to find blob %.12s in", c.Name, c.BlobSHA256)
	}
	mc := memChild{name: c.Name, contentType: c.ContentType, text: c.Text}
	var err error
	if c.Blob != nil {
		if mc.blob, err = io.ReadAll(c.Blob); err != nil {
			return err
		}
	}
	if c.Thumbnail != nil {
		if mc.thumb, err = io.ReadAll(c.Thumbnail); err != nil {
			return err
		}
	}
	o.children = append(o.children, mc)
	return nil
}

func (o *memOutput) SetText(_ context.Context, text string) error {
	if o.text == nil {
		o.text = &text
	}
	return nil
}

func (o *memOutput) SetThumbnail(_ context.Context, r io.Reader, _ string) error {
	_, err := io.Copy(io.Discard, r)
	return err
}

func (o *memOutput) SetContentType(ct string)                                 { o.contentType = ct }
func (o *memOutput) SetMetadata(map[string]any)                               {}
func (o *memOutput) SetOutput(context.Context, string, json.RawMessage) error { return nil }
func (o *memOutput) Emit(events ...string)                                    { o.events = append(o.events, events...) }
func (o *memOutput) Progress(float64)                                         {}
func (o *memOutput) Heartbeat()                                               {}
func (o *memOutput) Write(action.DomainWrite) error                           { return nil }
