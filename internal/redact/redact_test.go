package redact

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, in, want string }{
		{"password", "https://user:hunter2@example.com/hook", "https://user:xxxxx@example.com/hook"},
		{"token as user name", "nats://s3cr3t@nats:4222/sub", "nats://xxxxx@nats:4222/sub"},
		{"query token", "https://example.com/hook?token=abc&stream=S", "https://example.com/hook?token=xxxxx&stream=S"},
		{"order and encoding kept", "https://e.com/?b=1%2F2&access_token=t&a=x+y", "https://e.com/?b=1%2F2&access_token=xxxxx&a=x+y"},
		{"both", "https://u:p@e.com/h?secret=s&api_key=k", "https://u:xxxxx@e.com/h?secret=xxxxx&api_key=xxxxx"},
		{"presigned S3", "https://b.s3.amazonaws.com/k?X-Amz-Credential=AKIA%2F1&X-Amz-Date=20250101&X-Amz-Signature=ff&X-Amz-Security-Token=tt",
			"https://b.s3.amazonaws.com/k?X-Amz-Credential=xxxxx&X-Amz-Date=20250101&X-Amz-Signature=xxxxx&X-Amz-Security-Token=xxxxx"},
		{"azure SAS", "https://a.blob.core.windows.net/c?sv=2020&sig=abc%3D", "https://a.blob.core.windows.net/c?sv=2020&sig=xxxxx"},
		{"fragment", "https://e.com/cb#access_token=t&state=s", "https://e.com/cb#access_token=xxxxx&state=s"},
		{"postgres", "postgres://sluice:pw@db/sluice?sslmode=disable&password=pw", "postgres://sluice:xxxxx@db/sluice?sslmode=disable&password=xxxxx"},
		{"opaque webhook source", "webhook:?workflow=w&secret=s", "webhook:?workflow=w&secret=xxxxx"},
		{"file", "file:/var/log/out.jsonl", "file:/var/log/out.jsonl"},
		{"nothing secret", "https://example.com/a?workflow=w&as=file", "https://example.com/a?workflow=w&as=file"},
		{"invalid", "https://u:p@e.com/%zz?token=t", "(invalid URL)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := URL(tc.in); got != tc.want {
				t.Errorf("URL(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestSecret(t *testing.T) {
	t.Parallel()
	for _, name := range []string{
		"token", "access_token", "key", "api_key", "apikey", "apiKey", "secret", "client_secret", "password", "pass",
		"pwd", "sig", "signature", "auth", "credential", "X-Amz-Signature", "X-Amz-Credential", "X-Amz-Security-Token",
		"Authorization", "Proxy-Authorization", "Cookie", "Set-Cookie", "X-Auth-Token", "X-Api-Key", "X-Webhook-Secret",
		"Subscription-Key", "secret_file",
	} {
		if !Secret(name) {
			t.Errorf("Secret(%q) = false", name)
		}
	}
	for _, name := range []string{
		"workflow", "stream", "durable", "as", "event", "filter.status", "duplicates", "X-Request-Id", "Content-Type",
		"author", "keyword", "passthrough", "X-Amz-Date", "state", "sslmode",
	} {
		if Secret(name) {
			t.Errorf("Secret(%q) = true", name)
		}
	}
}

func TestError(t *testing.T) {
	t.Parallel()
	inner := &url.Error{Op: "Get", URL: "https://e.com/b?token=inner", Err: errors.New("redirect refused")}
	err := fmt.Errorf("webhook: %w", Error(&url.Error{Op: "Post", URL: "https://u:***@e.com/h?token=outer", Err: inner}))
	if got := err.Error(); strings.Contains(got, "outer") || strings.Contains(got, "inner") || !strings.Contains(got, "token=xxxxx") {
		t.Errorf("Error: %s", got)
	}
	if Error(nil) != nil {
		t.Error("Error(nil) != nil")
	}
}
