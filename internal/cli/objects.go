package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/sluice-project/sluice/internal/audit"
	"github.com/sluice-project/sluice/internal/builtin"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/node"
	"github.com/sluice-project/sluice/internal/objects"
	"github.com/sluice-project/sluice/internal/record"
)

const objectsSheetUsage = "objects sheet upload SHEET.csv --files DIR|s3://bucket/prefix [--custom-actions A,B] [--detach] | validate SHEET.csv --files DIR|s3://… | show ID | approve ID [--follow|--detach] | delete ID"

// runObjects is `sluice objects`: ingest sheets of works and file sets (docs/objects.md).
func runObjects(ctx context.Context, e *env, args []string) error {
	switch args[0] {
	case "sheet":
		return runObjectsSheet(ctx, e, args[1:])
	case "show":
		return runObjectsShow(ctx, e, args[1:])
	case "transcoded":
		return runObjectsTranscoded(ctx, e, args[1:])
	}
	return usagef("unknown objects subcommand %q (want sheet, show, transcoded)", args[0])
}

// openEngine opens the installation to run its workers here; when a server holds the data
// dir, it opens it without them and reports that the server runs the work.
func openEngine(ctx context.Context, e *env, c *common) (n *node.Node, here bool, err error) {
	n, err = c.open(ctx, e, true)
	if errors.Is(err, node.ErrLocked) {
		n, err = c.open(ctx, e, false)
		return n, false, err
	}
	return n, err == nil, err
}

func runObjectsSheet(ctx context.Context, e *env, args []string) error {
	fs, c := newFlags(e, "objects sheet", objectsSheetUsage)
	files := fs.String("files", "", "upload, validate: the directory, or s3://bucket/prefix (endpoint, region and keys from AWS_* variables, as --blobs), the sheet's file names are relative to")
	custom := fs.String("custom-actions", "", "upload: run exactly these actions for every file set (Meadow's names, comma-separated), not the role × MIME table's")
	detach := fs.Bool("detach", false, "upload, approve: return at once; the work runs in `sluice serve` (or `sluice resume`)")
	follow := fs.Bool("follow", false, "approve: follow the sheet until it ends (through the transcoder's wait), printing its progress")
	out := addOutputFlag(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 2 {
		return usagef("usage: sluice %s", objectsSheetUsage)
	}
	switch pos[0] {
	case "validate":
		return validateSheet(ctx, e, c, pos[1], *files, out.json())
	case "upload":
		if *files == "" {
			return usagef("upload needs --files DIR or --files s3://bucket/prefix")
		}
		if objects.IsS3(*files) { // its bucket and keys checked now, not when the sheet is validated
			if _, err := openFilesS3(ctx, *files); err != nil {
				return err
			}
		}
		f, err := os.Open(pos[1])
		if err != nil {
			return fmt.Errorf("open the sheet: %w", err)
		}
		defer f.Close()
		n, here, err := openEngine(ctx, e, c)
		if err != nil {
			return err
		}
		defer n.Close()
		if err := builtin.Apply(ctx, n.Engine, objects.Name); err != nil {
			return err
		}
		var actions []string
		if *custom != "" {
			actions = splitList(*custom)
		}
		id, err := objects.Upload(ctx, n.Engine, n.Blobs, objects.UploadParams{Name: filepath.Base(pos[1]), CSV: f, FilesDir: *files, CustomActions: actions})
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stderr, "sheet %d uploaded\n", id)
		if *detach {
			return nil
		}
		if here {
			n.Start(ctx)
			defer n.Stop(n.Drain())
		}
		s, err := waitSheetStatus(ctx, n, id, objects.StatusUploaded)
		if err != nil {
			return err
		}
		return printSheet(ctx, e, n, s, out.json())
	case "show", "approve", "delete":
		id, err := strconv.ParseInt(pos[1], 10, 64)
		if err != nil || id <= 0 {
			return usagef("want a sheet id, not %q", pos[1])
		}
		n, here, err := openEngine(ctx, e, c)
		if err != nil {
			return err
		}
		defer n.Close()
		if pos[0] == "delete" {
			if err := objects.Delete(ctx, n.Engine, id); err != nil {
				return err
			}
			fmt.Fprintf(e.stderr, "sheet %d deleted\n", id)
		}
		if pos[0] == "approve" {
			if err := objects.Approve(audit.Note(ctx, audit.Entry{Who: audit.LocalUser(), Action: "approve", Detail: fmt.Sprintf("sheet %d", id)}), n.Engine, id); err != nil {
				return err
			}
			fmt.Fprintf(e.stderr, "sheet %d approved\n", id)
			if *detach {
				return nil
			}
			if here {
				n.Start(ctx)
				defer n.Stop(n.Drain())
			}
			if *follow {
				err = followSheet(ctx, e, n, id)
			} else {
				err = awaitChains(ctx, e, n, id, here)
			}
			if err != nil {
				return err
			}
		}
		s, err := objects.Open(n.Engine).GetSheet(ctx, id)
		if err != nil {
			return err
		}
		if err := printSheet(ctx, e, n, s, out.json()); err != nil {
			return err
		}
		if pos[0] == "approve" && (s.Status == objects.StatusCompletedError || *follow && s.Status != objects.StatusCompleted) {
			return fmt.Errorf("sheet %d ended %s", id, s.Status)
		}
		return nil
	}
	return usagef("unknown objects sheet subcommand %q (want upload, validate, show, approve, delete)", pos[0])
}

func validateSheet(ctx context.Context, e *env, c *common, path, files string, asJSON bool) error {
	if files == "" {
		return usagef("validate needs --files DIR or --files s3://bucket/prefix")
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open the sheet: %w", err)
	}
	defer f.Close()
	n, err := c.open(ctx, e, false)
	if err != nil {
		return err
	}
	defer n.Close()
	v, err := objects.Validate(ctx, f, objects.Env{FilesDir: files, OpenS3: openFilesS3, Existing: objects.Open(n.Engine).Existing})
	if err != nil {
		return err
	}
	var failed []objects.Row
	for _, r := range v.Rows {
		if r.State == objects.CheckFail {
			failed = append(failed, r)
		}
	}
	if asJSON {
		if err := writeJSON(e.stdout, map[string]any{"status": v.Status, "state": v.Checks, "errors": orEmptyRows(v.FileErrors),
			"row_count": len(v.Rows), "failed_rows": orEmptyRows(failed)}); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(e.stdout, "%s: %s (file %s, rows %s), %d rows\n", path, v.Status, v.Checks.File, v.Checks.Rows, len(v.Rows))
		printErrors(e, v.FileErrors, failed)
	}
	if v.Status != objects.StatusValid {
		return fmt.Errorf("%s is not valid: %s", path, v.Status)
	}
	return nil
}

func orEmptyRows[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func printErrors(e *env, fileErrs []objects.FieldError, rows []objects.Row) {
	if len(fileErrs) == 0 && len(rows) == 0 {
		return
	}
	// Meadow's form: rows numbered from the first after the header, each message starting with
	// its field; the file's errors have no row.
	tw := tabwriter.NewWriter(e.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ROW\tERROR")
	for _, fe := range fileErrs {
		fmt.Fprintf(tw, "-\t%s\n", fe.Message)
	}
	for _, r := range rows {
		for _, fe := range r.Errors {
			fmt.Fprintf(tw, "%d\t%s\n", r.Row, fe.Message)
		}
	}
	_ = tw.Flush()
}

// waitSheetStatus waits for the sheet to leave a status.
func waitSheetStatus(ctx context.Context, n *node.Node, id int64, from string) (*objects.Sheet, error) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		s, err := objects.Open(n.Engine).GetSheet(ctx, id)
		if err != nil {
			return nil, err
		}
		if s.Status != from {
			return s, nil
		}
		if st, err := n.Engine.JobState(ctx, id); err == nil && st != record.JobRunning {
			return s, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

// awaitChains waits, after an approval, until the sheet is approved and its file sets' chains
// run: with a server running the installation, until the works are created; when this process
// runs the workers (here), until the job ends or only outside events (the transcoder's) can
// carry it on — nothing else would run its tasks.
func awaitChains(ctx context.Context, e *env, n *node.Node, id int64, here bool) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	db := objects.Open(n.Engine)
	for {
		done, waits, err := chainsRun(ctx, n, db, id, here)
		if err != nil {
			return err
		}
		if waits {
			fmt.Fprintf(e.stderr, "sheet %d waits for outside events (the transcoder's): `sluice serve` or `sluice resume %d` carries it on once they arrive\n", id, id)
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// chainsRun reports whether [awaitChains] is done, and whether because only outside events
// can carry the sheet on.
func chainsRun(ctx context.Context, n *node.Node, db *objects.Store, id int64, here bool) (done, waits bool, err error) {
	s, err := db.GetSheet(ctx, id)
	if err != nil || s.Status == objects.StatusAwaitingApproval {
		return false, false, err
	}
	if !here {
		return true, false, nil
	}
	p, err := n.Engine.Progress(ctx, id)
	if err != nil || p.State != record.JobRunning {
		return err == nil, false, err
	}
	if !p.Waiting || p.Tasks[record.TaskReady]+p.Tasks[record.TaskRunning]+p.Tasks[record.TaskParked] > 0 {
		return false, false, nil
	}
	idle, err := onlyTranscodesWait(ctx, db, id)
	return idle, idle, err
}

// onlyTranscodesWait reports whether every file set of the sheet is done or waits for its
// transcoder's event (CreateTranscodeJob ok, TranscodeComplete waiting).
func onlyTranscodesWait(ctx context.Context, db *objects.Store, id int64) (bool, error) {
	sets, err := db.ListFileSets(ctx, id)
	if err != nil {
		return false, err
	}
	for _, f := range sets {
		if f.State != objects.StatePending {
			continue
		}
		created, err := db.ActionOutcome(ctx, f.ID, "CreateTranscodeJob")
		if err != nil {
			return false, err
		}
		waits, err := db.ActionOutcome(ctx, f.ID, "TranscodeComplete")
		if err != nil || created != objects.OutcomeOK || waits != objects.OutcomeWaiting {
			return false, err
		}
	}
	return true, nil
}

// followSheet waits for a sheet's job to end, printing its progress.
func followSheet(ctx context.Context, e *env, n *node.Node, id int64) error {
	// The sheet's counts are read with the job's progress, in the background (see watchJob).
	var last atomic.Pointer[objects.Progress]
	_, err := watchJob(ctx, e, n, id, func(*engine.Progress, *record.Job) string {
		p := last.Load()
		if p == nil {
			return fmt.Sprintf("sheet %d: counting", id)
		}
		return sheetProgressLine(p)
	}, func(ctx context.Context) error {
		p, err := objects.Open(n.Engine).SheetProgress(ctx, id)
		if err == nil {
			last.Store(p)
		}
		return err
	})
	return err
}

func sheetProgressLine(p *objects.Progress) string {
	return fmt.Sprintf("sheet %d %s: actions %d/%d, file sets %d/%d complete (%d error), %.1f%%",
		p.SheetID, p.Status, p.DoneActions, p.TotalActions, p.FileSetsComplete, p.FileSets, p.FileSetsError, p.Percent)
}

func printSheet(ctx context.Context, e *env, n *node.Node, s *objects.Sheet, asJSON bool) error {
	db := objects.Open(n.Engine)
	p, err := db.SheetProgress(ctx, s.JobID)
	if err != nil {
		return err
	}
	failed, err := db.ListRows(ctx, s.JobID, true)
	if err != nil {
		return err
	}
	works, err := db.ListWorks(ctx, s.JobID)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(e.stdout, map[string]any{"sheet": s, "progress": p, "failed_rows": orEmptyRows(failed), "works": orEmptyRows(works)})
	}
	fmt.Fprintf(e.stdout, "sheet %d %s: %s (file %s, rows %s, overall %s), %d rows\n", s.JobID, s.Name, s.Status,
		s.Checks.File, s.Checks.Rows, s.Checks.Overall, s.RowCount)
	printErrors(e, s.Errors, failed)
	if len(works) > 0 {
		fmt.Fprintln(e.stdout, sheetProgressLine(p))
		tw := tabwriter.NewWriter(e.stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "WORK\tTYPE\tSTATE")
		for _, w := range works {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", w.Accession, w.WorkType, w.State)
		}
		_ = tw.Flush()
	}
	if s.Status == objects.StatusAwaitingApproval {
		fmt.Fprintf(e.stderr, "approve it with: sluice objects sheet approve %d\n", s.JobID)
	}
	return nil
}

func runObjectsShow(ctx context.Context, e *env, args []string) error {
	fs, c := newFlags(e, "objects show", "objects show WORK|FILESET [--history] [--json]")
	history := fs.Bool("history", false, "every outcome each action had (waiting, started, ok, error), with its time and notes, in order")
	out := addOutputFlag(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want one work or file set: its accession number (or a file set's id)")
	}
	n, err := c.open(ctx, e, false)
	if err != nil {
		return err
	}
	defer n.Close()
	db := objects.Open(n.Engine)
	if *history {
		h, err := db.GetHistory(ctx, pos[0])
		if err != nil {
			return err
		}
		if out.json() {
			return writeJSON(e.stdout, h)
		}
		if h.Work != "" {
			fmt.Fprintf(e.stdout, "work %s\n", h.Work)
		}
		for _, f := range h.FileSets {
			fmt.Fprintf(e.stdout, "file set %s %s (role %s, row %d): %s\n", f.Accession, f.ID, f.Role, f.Row, f.State)
			tw := tabwriter.NewWriter(e.stdout, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "  TIME\tACTION\tOUTCOME\tNOTES")
			for _, h := range f.History {
				fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", h.At.Local().Format("15:04:05.000"), h.Action, h.Outcome, h.Notes)
			}
			_ = tw.Flush()
		}
		return nil
	}
	w, f, err := db.GetObject(ctx, pos[0])
	if err != nil {
		return err
	}
	if out.json() {
		if w != nil {
			return writeJSON(e.stdout, map[string]any{"work": w})
		}
		return writeJSON(e.stdout, map[string]any{"file_set": f})
	}
	sets := []*objects.FileSet{f}
	if w != nil {
		fmt.Fprintf(e.stdout, "work %s (%s, sheet %d): %s\n", w.Accession, w.WorkType, w.JobID, w.State)
		sets = w.FileSets
	}
	for _, f := range sets {
		format := f.MimeType
		if puid := f.PUID(); puid != "" {
			format += ", PRONOM " + puid
		}
		fmt.Fprintf(e.stdout, "file set %s %s (role %s, %s, row %d): %s\n", f.Accession, f.ID, f.Role, format, f.Row, f.State)
		tw := tabwriter.NewWriter(e.stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  ACTION\tOUTCOME\tUPDATED\tNOTES")
		for _, a := range f.ActionStates {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", a.Action, a.Outcome, a.UpdatedAt.Local().Format(time.TimeOnly), a.Notes)
		}
		_ = tw.Flush()
	}
	return nil
}

func runObjectsTranscoded(ctx context.Context, e *env, args []string) error {
	fs, c := newFlags(e, "objects transcoded", "objects transcoded EVENT.json (a MediaConvert or Elastic Transcoder event, bare or in an SNS Notification)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want one file holding a Job State Change event")
	}
	body, err := os.ReadFile(pos[0])
	if err != nil {
		return err
	}
	n, err := c.open(ctx, e, false)
	if err != nil {
		return err
	}
	defer n.Close()
	f, err := objects.FireTranscoded(ctx, n.Engine, body, "")
	if err != nil {
		return err
	}
	if f.Note != "" {
		fmt.Fprintf(e.stdout, "%s; acknowledged\n", f.Note)
		return nil
	}
	if len(f.FileSets) == 0 {
		fmt.Fprintln(e.stdout, "no file set waits for this event; acknowledged, nothing fired")
		return nil
	}
	fmt.Fprintf(e.stdout, "fired on %d of %d file sets (items %s)\n", f.Fired, len(f.FileSets), strings.Trim(fmt.Sprint(f.FileSets), "[]"))
	return nil
}
