package objects

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sluice-project/sluice/internal/metadata"
)

// maxEventBytes bounds a transcoder's event, an untrusted body: an SNS envelope with its
// message, or the message alone.
const maxEventBytes = 1 << 20

// SNSEnvelope is an Amazon SNS HTTP(S) delivery: a Notification carries its message (a JSON
// string), a SubscriptionConfirmation the URL that confirms the subscription. Its signature
// fields are kept with the event fired ([TranscoderEvent.Body]'s "sns"), not checked here: the
// endpoint that receives it is authenticated by Sluice's own token.
type SNSEnvelope struct {
	Type             string `json:"Type"`
	MessageID        string `json:"MessageId"`
	TopicArn         string `json:"TopicArn"`
	Subject          string `json:"Subject,omitempty"`
	Message          string `json:"Message,omitempty"`
	Timestamp        string `json:"Timestamp,omitempty"`
	SignatureVersion string `json:"SignatureVersion,omitempty"`
	Signature        string `json:"Signature,omitempty"`
	SigningCertURL   string `json:"SigningCertURL,omitempty"`
	SubscribeURL     string `json:"SubscribeURL,omitempty"`
	UnsubscribeURL   string `json:"UnsubscribeURL,omitempty"`
	Token            string `json:"Token,omitempty"`
}

// The kinds of SNS delivery.
const (
	SNSNotification = "Notification"
	SNSSubscribe    = "SubscriptionConfirmation"
	SNSUnsubscribe  = "UnsubscribeConfirmation"
)

// TranscoderEvent is a transcoder's report as it arrived, read: which transcoder, the job's
// status, and the event to fire — always MediaConvert's EventBridge "Job State Change" shape,
// which the objects workflow's correlate: reads.
type TranscoderEvent struct {
	// Source is "mediaconvert" (an EventBridge Job State Change) or "elastictranscoder" (a
	// job's notification); "" for an SNS delivery that carries no event (a confirmation).
	Source string
	// Status is the job's: COMPLETE or ERROR end it (Elastic Transcoder's COMPLETED is
	// COMPLETE); any other (PROGRESSING, WARNING, …) does not.
	Status string
	// SNS is the envelope the event came in, nil for a bare event.
	SNS *SNSEnvelope
	// Body is the event to fire (nil when there is none): for an SNS delivery, the envelope's
	// fields but its message kept under "sns".
	Body []byte
}

// Ends reports whether the event ends its job, so that it may resume the file set waiting for it.
func (t *TranscoderEvent) Ends() bool { return t.Status == "COMPLETE" || t.Status == "ERROR" }

// ParseTranscoderEvent reads a transcoder's report in any form it arrives in: a MediaConvert
// Job State Change (EventBridge), an Elastic Transcoder job notification, or either inside an
// SNS Notification (its Message a JSON string); or an SNS subscription confirmation. An error
// says in plain words what the body is not.
func ParseTranscoderEvent(body []byte) (*TranscoderEvent, error) {
	if len(body) > maxEventBytes {
		return nil, fmt.Errorf("the event is larger than %d KiB", maxEventBytes>>10)
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(body, &probe); err != nil {
		return nil, errors.New("the event is not a JSON object")
	}
	if _, ok := probe["Type"]; ok && probe["TopicArn"] != nil {
		var env SNSEnvelope
		if err := json.Unmarshal(body, &env); err != nil {
			return nil, fmt.Errorf("the SNS delivery does not read: %v", err)
		}
		switch env.Type {
		case SNSSubscribe, SNSUnsubscribe:
			return &TranscoderEvent{SNS: &env}, nil
		case SNSNotification:
		default:
			return nil, fmt.Errorf("an SNS delivery of type %q is not a Notification or a SubscriptionConfirmation", env.Type)
		}
		ev, err := parseBareEvent([]byte(env.Message))
		if err != nil {
			return nil, fmt.Errorf("the SNS Notification's Message: %w", err)
		}
		ev.SNS = &env
		kept := env
		kept.Message = ""
		if ev.Body, err = withField(ev.Body, "sns", kept); err != nil {
			return nil, err
		}
		return ev, nil
	}
	return parseBareEvent(body)
}

// parseBareEvent reads a transcoder's event without an envelope.
func parseBareEvent(body []byte) (*TranscoderEvent, error) {
	var ev struct {
		DetailType string `json:"detail-type"`
		Detail     *struct {
			Status string `json:"status"`
		} `json:"detail"`
		// Elastic Transcoder's notification
		State           string `json:"state"`
		Version         string `json:"version"`
		JobID           string `json:"jobId"`
		PipelineID      string `json:"pipelineId"`
		OutputKeyPrefix string `json:"outputKeyPrefix"`
		Playlists       []struct {
			Name   string `json:"name"`
			Format string `json:"format"`
		} `json:"playlists"`
		Outputs []struct {
			Key string `json:"key"`
		} `json:"outputs"`
		UserMetadata   map[string]any `json:"userMetadata"`
		ErrorCode      any            `json:"errorCode"`
		MessageDetails string         `json:"messageDetails"`
	}
	// metadata.Unmarshal: userMetadata, errorCode and the report go into the stored body with
	// their numbers as the transcoder wrote them.
	if err := metadata.Unmarshal(body, &ev); err != nil {
		return nil, errors.New("the event is not a JSON object of a transcoder's")
	}
	switch {
	case ev.Detail != nil:
		if ev.DetailType != "" && ev.DetailType != "MediaConvert Job State Change" {
			return nil, fmt.Errorf("an EventBridge event of detail-type %q is not a MediaConvert Job State Change", ev.DetailType)
		}
		return &TranscoderEvent{Source: "mediaconvert", Status: ev.Detail.Status, Body: body}, nil
	case ev.State != "" && ev.PipelineID != "":
		// Elastic Transcoder: its report in MediaConvert's shape, the playlists' paths as
		// outputGroupDetails (the output key prefix, the playlist's name, .m3u8 for HLS).
		status := ev.State
		if status == "COMPLETED" {
			status = "COMPLETE"
		}
		var paths []any
		for _, p := range ev.Playlists {
			ext := ".m3u8"
			if strings.HasPrefix(p.Format, "Smooth") {
				ext = ".ism"
			} else if strings.HasPrefix(p.Format, "MPEG-DASH") {
				ext = ".mpd"
			}
			paths = append(paths, ev.OutputKeyPrefix+p.Name+ext)
		}
		if len(paths) == 0 {
			for _, o := range ev.Outputs {
				paths = append(paths, ev.OutputKeyPrefix+o.Key)
			}
		}
		detail := map[string]any{"status": status, "jobId": ev.JobID, "userMetadata": ev.UserMetadata,
			"outputGroupDetails": []any{map[string]any{"playlistFilePaths": paths}}}
		if status == "ERROR" {
			detail["errorCode"], detail["errorMessage"] = ev.ErrorCode, ev.MessageDetails
		}
		var report any
		_ = metadata.Unmarshal(body, &report)
		out, err := json.Marshal(map[string]any{"detail-type": "Elastic Transcoder Job State Change", "source": "aws.elastictranscoder",
			"detail": detail, "report": report})
		return &TranscoderEvent{Source: "elastictranscoder", Status: status, Body: out}, err
	}
	return nil, errors.New("the event is neither a MediaConvert Job State Change (detail.status) nor an Elastic Transcoder notification (state, pipelineId)")
}

// withField returns the JSON object body with the field k set to v.
func withField(body []byte, k string, v any) ([]byte, error) {
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		return nil, err
	}
	m[k] = v
	return json.Marshal(m)
}

// ConfirmSubscription confirms an SNS subscription by fetching the SubscribeURL of its
// confirmation with client — the egress policy's, so that a delivery cannot make the server call
// an address the policy refuses. The URL must be an http(s) URL asking ConfirmSubscription with
// a Token; the answer is read up to 64 KiB.
func ConfirmSubscription(ctx context.Context, client *http.Client, env *SNSEnvelope) error {
	u, err := url.Parse(env.SubscribeURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("the SubscribeURL %q is not an http(s) URL", env.SubscribeURL)
	}
	if q := u.Query(); q.Get("Action") != "ConfirmSubscription" || q.Get("Token") == "" {
		return fmt.Errorf("the SubscribeURL %q does not ask ConfirmSubscription with a Token", env.SubscribeURL)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("confirm the SNS subscription to %s: %w", env.TopicArn, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("confirm the SNS subscription to %s: %s answered %s", env.TopicArn, u.Host, resp.Status)
	}
	return nil
}
