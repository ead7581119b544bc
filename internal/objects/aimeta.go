package objects

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/settings"
	"github.com/sluice-project/sluice/internal/converter"
	"github.com/sluice-project/sluice/internal/egress"
	"github.com/sluice-project/sluice/internal/metadata"
)

// aiConfig is the GenerateAIMetadata step's settings: the command or the HTTP service that
// makes an image's metadata (Meadow asks a language model; here it is whatever the user names).
type aiConfig struct {
	chainConfig
	Command []string      `with:"command" doc:"the command that makes the metadata: its arguments, {file} replaced by the image's path (else the path last); it prints a JSON object"`
	URL     string        `with:"url" doc:"an http(s) service the image is POSTed to (its bytes, its MIME type as Content-Type); it answers a JSON object"`
	Timeout time.Duration `with:"timeout" doc:"how long the command or the service may take (default 5m)"`
}

var aiSettings = settings.For(func() aiConfig { return aiConfig{Timeout: 5 * time.Minute} }, func(c *aiConfig) error {
	if len(c.Command) > 0 && c.URL != "" {
		return &action.SettingError{Key: "url", Reason: "give a command or a url, not both"}
	}
	if c.URL != "" {
		if u, err := url.Parse(c.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return &action.SettingError{Key: "url", Reason: fmt.Sprintf("%q is not an http(s) URL", c.URL)}
		}
	}
	if len(c.Command) > 0 && c.Command[0] == "" {
		return &action.SettingError{Key: "command", Reason: "the command's first element (the program) is empty"}
	}
	return nil
})

// maxAIMetadata bounds the metadata a command or service returns (untrusted output).
const maxAIMetadata = 1 << 20

// aiUnconfigured is the GenerateAIMetadata step's skip: with neither a command nor a url, the
// action is ok with a note saying so (Meadow marks it ok when a sheet is not an AI ingest).
func aiUnconfigured(c *call) string {
	cfg, err := aiSettings.Parse(c.t.With)
	if err == nil && len(cfg.Command) == 0 && cfg.URL == "" {
		return "skipped: not configured (set command or url in the generate-ai-metadata step's with:)"
	}
	return ""
}

// generateAIMetadata runs the step's command on the image (sandboxed, as every converter) or
// POSTs the image to its service, through the egress policy, and records the JSON object
// returned as the file set's ai_metadata.
func (s *Service) generateAIMetadata(ctx context.Context, c *call) error {
	cfg, err := aiSettings.Parse(c.t.With)
	if err != nil {
		return action.Permanent(err)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	var out []byte
	var from string
	if len(cfg.Command) > 0 {
		out, err = c.aiCommand(ctx, cfg.Command)
		from = "command " + cfg.Command[0]
	} else {
		out, err = c.aiService(ctx, s.Egress.Client(), cfg.URL)
		from = "service " + cfg.URL
	}
	if err != nil {
		return err
	}
	var md map[string]any
	if err := metadata.Unmarshal(out, &md); err != nil || md == nil {
		return action.Permanentf("generate ai metadata: the %s returned no JSON object (%d bytes)", from, len(out))
	}
	keys := make([]string, 0, len(md))
	for k := range md {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	c.notes = "from the " + from + ": " + strings.Join(keys, ", ")
	return c.core("ai_metadata", md)
}

// aiCommand runs the command with the image staged in the task's directory.
func (c *call) aiCommand(ctx context.Context, command []string) ([]byte, error) {
	r, src, err := c.runner(ctx)
	if err != nil {
		return nil, err
	}
	args, placed := make([]string, 0, len(command)), false
	for _, a := range command[1:] {
		if strings.Contains(a, "{file}") {
			a, placed = strings.ReplaceAll(a, "{file}", src), true
		}
		args = append(args, a)
	}
	if !placed {
		args = append(args, src)
	}
	r.Env = append(r.Env, "SLUICE_FILE_SET_ID="+c.id, "SLUICE_ACCESSION_NUMBER="+c.md("file_accession_number"),
		"SLUICE_MIME_TYPE="+c.t.Item.ContentType)
	out, err := r.Output(ctx, command[0], maxAIMetadata, args...)
	if err != nil {
		return nil, converter.Failure("generate ai metadata", err)
	}
	return out, nil
}

// aiService POSTs the image to the service and returns its answer.
func (c *call) aiService(ctx context.Context, client *http.Client, service string) ([]byte, error) {
	f, err := c.open(ctx, c.md("location"), 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, service, f)
	if err != nil {
		return nil, action.Permanent(err)
	}
	req.Header.Set("Content-Type", c.t.Item.ContentType)
	req.Header.Set("X-Sluice-File-Set-Id", c.id)
	req.Header.Set("X-Sluice-Accession-Number", c.md("file_accession_number"))
	resp, err := client.Do(req)
	if err != nil {
		if egress.IsRefused(err) {
			return nil, action.Permanentf("generate ai metadata: %v", err)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, action.Permanentf("generate ai metadata: %s did not answer in time", service)
		}
		return nil, fmt.Errorf("generate ai metadata: %w", err) // a network error: tried again
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAIMetadata+1))
	if err != nil {
		return nil, fmt.Errorf("generate ai metadata: read the answer of %s: %w", service, err)
	}
	switch {
	case len(body) > maxAIMetadata:
		return nil, action.Permanentf("generate ai metadata: %s answered more than %d bytes", service, maxAIMetadata)
	case resp.StatusCode >= 500:
		return nil, fmt.Errorf("generate ai metadata: %s answered %s", service, resp.Status)
	case resp.StatusCode/100 != 2:
		return nil, action.Permanentf("generate ai metadata: %s answered %s: %.200s", service, resp.Status, body)
	}
	return body, nil
}
