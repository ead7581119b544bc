package objects_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/objects"
)

// snsNotification wraps a message in an SNS Notification as SNS delivers it over HTTP.
func snsNotification(message []byte) []byte {
	b, _ := json.Marshal(map[string]any{"Type": "Notification", "MessageId": "5f1d0c4e-0000-4000-8000-000000000001",
		"TopicArn": "arn:aws:sns:us-east-1:000000000000:transcoded", "Subject": "job state change", "Message": string(message),
		"Timestamp": "2026-11-29T00:00:00.000Z", "SignatureVersion": "1", "Signature": "c2lnbmF0dXJl",
		"SigningCertURL": "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-0000.pem",
		"UnsubscribeURL": "https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe"})
	return b
}

// elasticTranscoderReport is an Elastic Transcoder job notification (the message SNS carries).
func elasticTranscoderReport(fileSetID, state string) []byte {
	r := map[string]any{"state": state, "version": "2012-09-25", "jobId": "1764201600000-et0001", "pipelineId": "1764201600000-pipe01",
		"input": map[string]any{"key": "in.mp4"}, "outputKeyPrefix": "streaming/" + fileSetID + "/",
		"outputs":      []any{map[string]any{"id": "1", "presetId": "1351620000001-200010", "key": "hls_2m", "status": "Complete"}},
		"playlists":    []any{map[string]any{"name": "index", "format": "HLSv3", "outputKeys": []any{"hls_2m"}, "status": "Complete"}},
		"userMetadata": map[string]any{"file_set_id": fileSetID}}
	if state == "ERROR" {
		r["errorCode"], r["messageDetails"] = 4000, "The input file could not be decoded"
	}
	b, _ := json.Marshal(r)
	return b
}

// TestTranscoderEventForms runs four file sets to their transcoder's wait (a custom chain, no
// tools) and ends each with the event in another form — a bare MediaConvert COMPLETE, an
// MediaConvert ERROR inside an SNS Notification, an Elastic Transcoder COMPLETED inside one,
// and a bare Elastic Transcoder ERROR — after a PROGRESSING that ends nothing: each ends exactly
// its own file set, with its playlist or its error.
func TestTranscoderEventForms(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var rows strings.Builder
	rows.WriteString(strings.Join(objects.Headers, ",") + "\n")
	for i := 1; i <= 4; i++ {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("s%d.txt", i)), []byte(fmt.Sprint("supplement ", i)), 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&rows, "VIDEO,tv,tv-%d,s%d.txt,part %d,S,part %d,,\n", i, i, i, i)
	}
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		t.Parallel()
		kit := startObjects(t, open)
		ctx := t.Context()
		x := kit.Store.DomainSQL()
		id, err := objects.Upload(ctx, kit.Engine, kit.Blobs, objects.UploadParams{Name: "forms.csv", CSV: strings.NewReader(rows.String()), FilesDir: dir,
			CustomActions: []string{"GenerateFileSetDigests", "CreateTranscodeJob", "TranscodeComplete", "FileSetComplete"}})
		if err != nil {
			t.Fatal(err)
		}
		waitSheet(t, kit, id, objects.StatusAwaitingApproval)
		if err := objects.Approve(ctx, kit.Engine, id); err != nil {
			t.Fatal(err)
		}
		fs := func(i int) string { return objects.FileSetID(fmt.Sprintf("tv-%d", i)) }
		for i := 1; i <= 4; i++ {
			waitTranscodePending(t, kit, fs(i))
		}
		progressing := []byte(strings.Replace(string(transcodeEvent(fs(1), "COMPLETE")), `"status":"COMPLETE"`, `"status":"PROGRESSING"`, 1))
		events := []struct {
			name string
			body []byte
			src  string
			sns  string
		}{
			{"MediaConvert PROGRESSING in SNS", snsNotification(progressing), "mediaconvert", "Notification"},
			{"MediaConvert COMPLETE", transcodeEvent(fs(1), "COMPLETE"), "mediaconvert", ""},
			{"MediaConvert ERROR in SNS", snsNotification(transcodeEvent(fs(2), "ERROR")), "mediaconvert", "Notification"},
			{"Elastic Transcoder COMPLETED in SNS", snsNotification(elasticTranscoderReport(fs(3), "COMPLETED")), "elastictranscoder", "Notification"},
			{"Elastic Transcoder ERROR", elasticTranscoderReport(fs(4), "ERROR"), "elastictranscoder", ""},
		}
		for i, ev := range events {
			f, err := objects.FireTranscoded(ctx, kit.Engine, ev.body, "")
			want := 1
			if i == 0 {
				want = 0
			}
			if err != nil || f.Fired != want || f.Source != ev.src || f.SNS != ev.sns {
				t.Fatalf("%s: %+v, %v; want %d fired from %s (sns %q)", ev.name, f, err, want, ev.src, ev.sns)
			}
		}
		waitSheet(t, kit, id, objects.StatusCompletedError)
		for i, want := range []struct{ state, derivative, note string }{
			{objects.StateComplete, "s3://streaming/" + fs(1) + "/reel.m3u8", ""},
			{objects.StateError, "", "Unable to open input file: the test transcoder refuses this one (transcode job 1764201600000-test01, error code 1401)"},
			{objects.StateComplete, "streaming/" + fs(3) + "/index.m3u8", ""},
			{objects.StateError, "", "The input file could not be decoded (transcode job 1764201600000-et0001, error code 4000)"},
		} {
			f, err := objects.NewStore(x).GetFileSet(ctx, fs(i+1))
			if err != nil {
				t.Fatal(err)
			}
			var tc objects.ActionState
			for _, a := range f.ActionStates {
				if a.Action == "TranscodeComplete" {
					tc = a
				}
			}
			if f.State != want.state || want.derivative != "" && !strings.Contains(string(f.Derivatives["playlist"]), want.derivative) ||
				want.note != "" && (tc.Outcome != objects.OutcomeError || !strings.Contains(tc.Notes, want.note)) {
				t.Errorf("tv-%d: state %s, playlist %s, TranscodeComplete %+v; want %+v", i+1, f.State, f.Derivatives["playlist"], tc, want)
			}
		}
		// The event fired on the item of the file set it names, and on no other.
		for i := 1; i <= 4; i++ {
			evs, err := kit.Store.EventListByItem(ctx, itemOf(t, kit, fs(i)))
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(" "+strings.Join(evs, " ")+" ", " transcoded "); n != 1 {
				t.Errorf("tv-%d: transcoded fired %d times; events %v", i, n, evs)
			}
		}
	})
}

// itemOf returns the item id of a file set.
func itemOf(t *testing.T, kit *enginetest.Kit, fileSetID string) int64 {
	t.Helper()
	f, err := objects.NewStore(kit.Store.DomainSQL()).FileSet(t.Context(), fileSetID)
	if err != nil {
		t.Fatal(err)
	}
	return f.ItemID
}

// TestParseTranscoderEvent reads each form a report arrives in, and refuses what is none, in
// plain words.
func TestParseTranscoderEvent(t *testing.T) {
	t.Parallel()
	id := objects.FileSetID("p-1")
	ev, err := objects.ParseTranscoderEvent(snsNotification(elasticTranscoderReport(id, "COMPLETED")))
	if err != nil || ev.Source != "elastictranscoder" || ev.Status != "COMPLETE" || !ev.Ends() || ev.SNS == nil {
		t.Fatalf("%+v, %v", ev, err)
	}
	var fired struct {
		Detail struct {
			UserMetadata       map[string]any `json:"userMetadata"`
			OutputGroupDetails []struct {
				PlaylistFilePaths []string `json:"playlistFilePaths"`
			} `json:"outputGroupDetails"`
		} `json:"detail"`
		SNS objects.SNSEnvelope `json:"sns"`
	}
	if err := json.Unmarshal(ev.Body, &fired); err != nil {
		t.Fatal(err)
	}
	if fired.Detail.UserMetadata["file_set_id"] != id || fired.Detail.OutputGroupDetails[0].PlaylistFilePaths[0] != "streaming/"+id+"/index.m3u8" ||
		fired.SNS.Signature != "c2lnbmF0dXJl" || fired.SNS.SigningCertURL == "" || fired.SNS.MessageID == "" || fired.SNS.Message != "" {
		t.Errorf("fired body %s", ev.Body)
	}
	for _, tc := range []struct{ body, want string }{
		{`[1, 2]`, "the event is not a JSON object"},
		{`{"Type": "Notification", "TopicArn": "arn:x", "Message": "not json"}`, "the SNS Notification's Message: the event is not a JSON object"},
		{`{"Type": "Weird", "TopicArn": "arn:x"}`, `an SNS delivery of type "Weird"`},
		{`{"detail-type": "EC2 Instance State-change Notification", "detail": {"state": "running"}}`, "is not a MediaConvert Job State Change"},
		{`{"hello": "world"}`, "neither a MediaConvert Job State Change"},
		{`{"x": "` + strings.Repeat("y", 1<<20) + `"}`, "larger than 1024 KiB"},
	} {
		if _, err := objects.ParseTranscoderEvent([]byte(tc.body)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%.60s: %v, want %q", tc.body, err, tc.want)
		}
	}
}

// TestElasticTranscoderNumbersExact: an Elastic Transcoder notification's userMetadata,
// errorCode and report keep their numbers as written in the event's body — a 20-digit id and
// 1.50 — bare or inside an SNS Notification.
func TestElasticTranscoderNumbersExact(t *testing.T) {
	t.Parallel()
	const report = `{"state":"ERROR","version":"2012-09-25","jobId":"j1","pipelineId":"p1","outputKeyPrefix":"streaming/f/",` +
		`"userMetadata":{"file_set_id":"f","big":12345678901234567890,"price":1.50},"errorCode":12345678901234567890,"messageDetails":"bad input"}`
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"bare", []byte(report)},
		{"sns", snsNotification([]byte(report))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ev, err := objects.ParseTranscoderEvent(tc.body)
			if err != nil {
				t.Fatal(err)
			}
			var body struct {
				Detail struct {
					UserMetadata json.RawMessage `json:"userMetadata"`
					ErrorCode    json.RawMessage `json:"errorCode"`
				} `json:"detail"`
				Report struct {
					UserMetadata json.RawMessage `json:"userMetadata"`
					ErrorCode    json.RawMessage `json:"errorCode"`
				} `json:"report"`
			}
			if err := json.Unmarshal(ev.Body, &body); err != nil {
				t.Fatal(err)
			}
			const md, code = `{"big":12345678901234567890,"file_set_id":"f","price":1.50}`, `12345678901234567890`
			if string(body.Detail.UserMetadata) != md || string(body.Report.UserMetadata) != md ||
				string(body.Detail.ErrorCode) != code || string(body.Report.ErrorCode) != code {
				t.Errorf("event body %s\nwant userMetadata %s and errorCode %s in detail and report", ev.Body, md, code)
			}
		})
	}
}
