package sink_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-project/sluice/internal/natstest"
	"github.com/sluice-project/sluice/internal/sink"
)

// stream creates a stream of its own on the machine's NATS server for the test (deleted at
// its end) and returns it, its name and a sink that publishes into it.
func stream(t *testing.T, cfg jetstream.StreamConfig) (jetstream.JetStream, string, sink.Sink) {
	t.Helper()
	base := natstest.Shared(t)
	nc, err := nats.Connect(base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Name = fmt.Sprintf("SINKTEST_%d", time.Now().UnixNano())
	cfg.Subjects = []string{cfg.Name + ".>"}
	if _, err := js.CreateStream(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), cfg.Name) })
	s, err := sink.Open(t.Context(), base+"/"+cfg.Name, sink.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return js, cfg.Name, s
}

// stored returns the ids of the stream's messages, in the stream's order, as "subject:id".
func stored(t *testing.T, js jetstream.JetStream, name string) []string {
	t.Helper()
	s, err := js.Stream(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(t.Context(), seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, strings.TrimPrefix(m.Subject, name+".")+":"+m.Header.Get(jetstream.MsgIDHeader))
	}
	return out
}

func msg(subject, id string, size int) sink.Message {
	return sink.Message{ID: id, Subject: subject, Body: []byte(strings.Repeat("x", size))}
}

// TestNATSFailureIsNotOvertaken injects a failed publish in the middle of a pipelined batch —
// a message larger than the stream accepts, which JetStream refuses while it stores the rest —
// and shows that no later message of the batch is stored before it: they are reported not
// attempted (not failures), and once the stream accepts the message, the retry stores it and
// then the others, in the order they were sent. A redelivery of a message the stream already
// holds is acknowledged, not refused for its expectation.
func TestNATSFailureIsNotOvertaken(t *testing.T) {
	t.Parallel()
	js, name, s := stream(t, jetstream.StreamConfig{MaxMsgSize: 1000, Duplicates: time.Minute})

	batch := []sink.Message{msg("a", "1", 10), msg("b", "2", 10), msg("a", "3", 5000), msg("b", "4", 10), msg("a", "5", 10), msg("a", "6", 10)}
	errs := s.Send(t.Context(), batch)
	for i, want := range []string{"", "", "failed", "not attempted", "not attempted", "not attempted"} {
		switch got := errs[i]; {
		case want == "" && got != nil:
			t.Errorf("message %s: %v, want stored", batch[i].ID, got)
		case want == "failed" && (got == nil || errors.Is(got, sink.ErrNotAttempted)):
			t.Errorf("message %s: %v, want refused for its size", batch[i].ID, got)
		case want == "not attempted" && !errors.Is(got, sink.ErrNotAttempted):
			t.Errorf("message %s (after the failed one): %v, want ErrNotAttempted", batch[i].ID, got)
		}
	}
	if got, want := strings.Join(stored(t, js, name), " "), "a:1 b:2"; got != want {
		t.Fatalf("stream holds %q, want %q: a message overtook the failed one", got, want)
	}

	if _, err := js.UpdateStream(t.Context(), jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"},
		MaxMsgSize: 10000, Duplicates: time.Minute}); err != nil {
		t.Fatal(err)
	}
	// The relay's retry starts at the failed message; a redelivery of one the stream holds
	// (1, as after a crash before the relay deleted it) comes first here.
	deliver(t, s, append([]sink.Message{batch[0]}, batch[2:]...))
	if got, want := strings.Join(stored(t, js, name), " "), "a:1 b:2 a:3 b:4 a:5 a:6"; got != want {
		t.Fatalf("stream holds %q, want %q", got, want)
	}
}

// deliver sends msgs as the outbox's relay does: each round the messages not yet acknowledged,
// in order, until none is left; a failure other than ErrNotAttempted fails t. It returns the
// number of rounds.
func deliver(t *testing.T, s sink.Sink, msgs []sink.Message) int {
	t.Helper()
	rounds := 0
	for len(msgs) > 0 {
		if rounds++; rounds > 1000 {
			t.Fatalf("%d messages left after 1000 rounds", len(msgs))
		}
		var left []sink.Message
		for i, err := range s.Send(t.Context(), msgs) {
			if err != nil {
				if !errors.Is(err, sink.ErrNotAttempted) {
					t.Fatalf("message %s: %v", msgs[i].ID, err)
				}
				left = append(left, msgs[i])
			}
		}
		msgs = left
	}
	return rounds
}

// TestNATSSharedStream shows that another publisher writing to the sink's stream at the same
// time costs retries, not messages or order: every message is stored once, in order per
// subject.
func TestNATSSharedStream(t *testing.T) {
	t.Parallel()
	js, name, s := stream(t, jetstream.StreamConfig{Duplicates: time.Minute})
	other := make(chan error, 1)
	go func() {
		for i := range 200 {
			if _, err := js.Publish(context.Background(), name+".other", []byte("x"), jetstream.WithMsgID(fmt.Sprint("other-", i))); err != nil {
				other <- err
				return
			}
		}
		other <- nil
	}()
	var msgs []sink.Message
	for i := range 200 {
		msgs = append(msgs, msg(fmt.Sprintf("s%d", i%3), fmt.Sprintf("m%03d", i), 10))
	}
	var rounds int
	for range 10 { // batches of 20, as the relay's
		rounds += deliver(t, s, msgs[:20])
		msgs = msgs[20:]
	}
	if err := <-other; err != nil {
		t.Fatal(err)
	}
	last := map[string]string{}
	n := 0
	for _, m := range stored(t, js, name) {
		subject, id, _ := strings.Cut(m, ":")
		if subject == "other" {
			continue
		}
		n++
		if id <= last[subject] {
			t.Fatalf("subject %s: %s stored after %s", subject, id, last[subject])
		}
		last[subject] = id
	}
	if n != 200 {
		t.Fatalf("%d messages stored, want 200", n)
	}
	t.Logf("200 messages in %d rounds beside another publisher", rounds)
}
