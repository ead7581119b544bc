package cli

import (
	"fmt"
	"io"
	"strings"
)

// Exit codes of [Main], documented in `sluice help` and the README.
const (
	ExitOK     = 0 // the command did what it was asked; a job it followed completed
	ExitFailed = 1 // the command failed, or a job it followed ended failed or canceled
	ExitUsage  = 2 // the command line is wrong: unknown command or flag, missing argument
	ExitLocked = 3 // another engine process holds the data dir (wait for it, or stop it)
)

// exitCodes is the text of `sluice help` on exit codes.
const exitCodes = `Exit codes:
  0  done (a followed job completed)
  1  failed: the command failed, or a job it followed ended failed or canceled
  2  usage: unknown command or flag, missing or bad argument
  3  the data dir is locked by another engine process (sluice serve, ingest, run, resume)`

// helpText is what `sluice CMD [SUB] -h` says beyond the flags.
type helpText struct {
	about    string
	examples []string
}

// helpTexts returns the help of every command and subcommand, keyed "cmd" or "cmd sub".
func helpTexts() map[string]helpText {
	return map[string]helpText{
		"graph": {"Traverse the dependency graph of the roots (module@version; group:artifact:version with --type maven; name@version with --type npm) through the graph workflow, resolving each package version once for the whole installation, and print it. The same command after a kill resumes the same job.",
			[]string{"sluice graph golang.org/x/mod@v0.41.0 --format path", "sluice graph --type maven --source ./repo --scope build org.example:app:1.0 --format dot", "sluice graph --type npm express@4.21.2 --format path"}},
		"ingest": {"Ingest files, folders and archives through the documents workflow and follow the job. The same command after a kill resumes the same job.",
			[]string{"sluice ingest ~/Documents/reports.zip", "sluice ingest --ocr --lang de scans/"}},
		"fileset": {"Ingest datasets: find each request's platform (Dataverse, Figshare, Zenodo, archive.org), check limits, download and verify every file into the blob store, and write one result per request. The same command after a kill resumes the same job; a request already archived is success-existing.",
			[]string{"sluice fileset https://zenodo.org/record/5555", "sluice fileset --requests requests.jsonl --results results.jsonl", "sluice fileset results --status success"}},
		"fileset results": {"List the stored results of the requests whose platform was identified (ingest_fileset_platform), by (ingest_type, base_url).",
			[]string{"sluice fileset results", "sluice fileset results --status platform-404 --output json"}},
		"documents search": {"Search the ingested documents' text: words (all must match), \"exact phrases\", a OR b, -excluded, prefix*; accents and case folded, CJK by substring.",
			[]string{`sluice documents search "contract renewal" -draft`, "sluice documents search 'pièce OR piece*' --job 3 --output json"}},
		"documents reindex": {"Index the documents recorded before the search index existed; resumable, with progress.",
			[]string{"sluice documents reindex", "sluice documents reindex --batch 5000"}},
		"outbox status": {"Show the outbox per sink: pending messages, the oldest one's age, deliveries, failures and drops.",
			[]string{"sluice outbox status", "sluice outbox status --sink results=nats://127.0.0.1:4222/sluice --json"}},
		"documents list": {"List the documents and errors of a documents job (default: the newest).",
			[]string{"sluice documents list", "sluice documents list --job 3 --output json"}},
		"documents show": {"Show one document's index entry and text, or its error.",
			[]string{"sluice documents show 12", "sluice documents show 12 --output json"}},
		"documents export": {"Export a job's documents: files, index.jsonl and errors.jsonl in a directory, or the index on stdout.",
			[]string{"sluice documents export --out exported/", "sluice documents export --format jsonl --job 3 > index.jsonl"}},
		"doctor": {"Show which converters and which sandbox are installed, and what is degraded without them.",
			[]string{"sluice doctor", "sluice doctor --output json"}},
		"run": {"Start a job of a workflow file or stored workflow over files and follow it to its end.",
			[]string{"sluice run examples/mediathread.yaml lecture.mp4", "sluice run documents --meta '{\"source\":\"scanner\"}' a.pdf b.docx"}},
		"watch": {"Watch a folder (a consume folder) or an S3 prefix (a drop bucket) and make a job of the workflow for each file once its size and time have settled: exactly one job per file, across restarts and several watchers. The jobs run in `sluice serve` or `sluice worker --database`.",
			[]string{"sluice watch /srv/inbox --workflow documents --move-done", "sluice watch s3://media/drop --workflow mediathread-video --tag-done", "sluice watch ./scans --workflow documents --settle 0 --once"}},
		"resume": {"Resume the data dir's unfinished jobs and wait for them.",
			[]string{"sluice resume", "sluice --data /srv/sluice resume -v"}},
		"job list": {"List jobs, newest first.",
			[]string{"sluice job list", "sluice job list --state failed --output json"}},
		"job show": {"Show a job: its progress, its items and their tasks.",
			[]string{"sluice job show 1", "sluice job show 1 --output json"}},
		"job history": {"Show every attempt of a job's tasks: when it was queued, how long it waited and ran, its worker and error.",
			[]string{"sluice job history 1", "sluice job history 1 --limit 0 --output json"}},
		"job cancel": {"Cancel a running job.", []string{"sluice job cancel 1"}},
		"job retry": {"Run a failed or complete job's failed tasks again.",
			[]string{"sluice job retry 1", "sluice job retry 1 --follow"}},
		"objects sheet": {"Upload an ingest sheet (a CSV of works and file sets) and see it validated row by row (Meadow's row numbers and messages); show it; approve it (it returns once the chains run; --follow follows the ingest to its end); or validate it without uploading.",
			[]string{"sluice objects sheet upload sheet.csv --files /srv/ingest/batch-7", "sluice objects sheet approve 4", "sluice objects sheet approve 4 --follow", "sluice objects sheet validate sheet.csv --files /srv/ingest/batch-7",
				"AWS_ENDPOINT_URL_S3=http://127.0.0.1:7070 sluice objects sheet upload sheet.csv --files s3://ingest/batch-8"}},
		"objects show": {"Show a work (with its file sets) or a file set: every action's state, with notes and times; --history: every outcome each action had, in order.",
			[]string{"sluice objects show w-1987-001", "sluice objects show f-1987-001-a --json", "sluice objects show w-1987-001 --history"}},
		"objects transcoded": {"Hand a transcoder's report — a MediaConvert Job State Change or an Elastic Transcoder notification, bare or in an SNS Notification — to the file set whose file_set_id it carries.",
			[]string{"sluice objects transcoded complete.json", "sluice objects transcoded sns-notification.json"}},
		"event fire": {"Fire a declared external event on an item, or on every item of a job whose metadata matches.",
			[]string{"sluice event fire --item 7 approved", "sluice event fire --job 1 --key transcode_job=tj-1 et-job-finished"}},
		"workflow validate": {"Check workflow files: errors and warnings name their step, field and line.",
			[]string{"sluice workflow validate my-flow.yaml"}},
		"workflow graph": {"Draw a workflow (file, stored or built-in) as a Petri net, in SVG or DOT.",
			[]string{"sluice workflow graph documents > documents.svg", "sluice workflow graph my-flow.yaml --format dot -o flow.dot"}},
		"workflow apply": {"Validate and store workflow files as new versions.",
			[]string{"sluice workflow apply my-flow.yaml"}},
		"workflow list": {"List stored workflow versions and the built-in workflows.",
			[]string{"sluice workflow list", "sluice workflow list --output json"}},
		"workflow actions": {"List the action catalog: outcomes, settings and what each does.",
			[]string{"sluice workflow actions"}},
		"gc": {"Delete blobs no row references any more (older than --grace).",
			[]string{"sluice gc", "sluice gc --grace 24h"}},
		"serve": {"Run the web UI, the HTTP API, /metrics, the remote worker protocol and the workers in one process.",
			[]string{"sluice serve", "sluice serve --listen 0.0.0.0:7080 --remote Pdf,Office --log-format json"}},
		"worker": {"Serve a remote action by running a local command per task, or the built-in action of that name (no command), or (with --database) run workers against a shared PostgreSQL.",
			[]string{"SLUICE_TOKEN=… sluice worker --server http://sluice:7080 --action Pdf -- ./convert.sh",
				"SLUICE_TOKEN=… sluice worker --server http://sluice:7080 --action graph-resolve",
				"sluice worker --database postgres://db/sluice --blobs s3://bucket/prefix --actions office,pdf"}},
		"migrate up": {"Apply PostgreSQL schema migrations.",
			[]string{"sluice migrate up --database postgres://db/sluice"}},
		"migrate status": {"Show which PostgreSQL schema migrations are applied.",
			[]string{"sluice migrate status --database postgres://db/sluice"}},
		"migrate copy": {"Copy an embedded installation (rows and blobs) to an empty PostgreSQL schema and S3.",
			[]string{"sluice migrate copy --from sluice-data --to postgres://db/sluice --blobs s3://bucket/prefix"}},
		"token create": {"Create an API token; its plaintext is shown once.",
			[]string{"sluice token create --role admin", "sluice token create --role worker > worker.token"}},
		"token list": {"List API tokens (never their hashes).",
			[]string{"sluice token list", "sluice token list --output json"}},
		"token revoke": {"Revoke an API token.", []string{"sluice token revoke 3f2a9c"}},
		"completion bash": {"Print the bash completion script.",
			[]string{"source <(sluice completion bash)", "sluice completion bash > /etc/bash_completion.d/sluice"}},
		"completion zsh": {"Print the zsh completion script.",
			[]string{"sluice completion zsh > \"${fpath[1]}/_sluice\""}},
		"completion fish": {"Print the fish completion script.",
			[]string{"sluice completion fish > ~/.config/fish/completions/sluice.fish"}},
		"config show": {"Print the effective configuration (flags > SLUICE_* environment > " + ConfigFile + " > defaults) with secrets masked, and where each value came from.",
			[]string{"sluice config show", "sluice --config /etc/sluice/" + ConfigFile + " config show --output json"}},
		"version": {"Print the module version and VCS revision of this binary.",
			[]string{"sluice version", "sluice version --output json"}},
	}
}

// printCommandHelp prints the help of a command of subcommands (`sluice job -h`).
func printCommandHelp(w io.Writer, c command) {
	fmt.Fprintf(w, "Usage: sluice %s %s [flags] [args]\n\n%s\n\nSubcommands:\n", c.name, strings.Join(c.subs, "|"), c.summary)
	for _, s := range c.subs {
		fmt.Fprintf(w, "  %-9s %s\n", s, helpTexts()[c.name+" "+s].about)
	}
	fmt.Fprintf(w, "\nRun 'sluice %s SUBCOMMAND -h' for a subcommand's flags and examples.\n", c.name)
}
