package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-project/sluice/internal/natstest"
	"github.com/sluice-project/sluice/internal/poll"
)

// relayWorkflow makes a job of each request and publishes its outcome to the sink "bus".
const relayWorkflow = `name: handle-request
steps:
  handle:
    action: noop
    needs: [start]
    publish:
      - {sink: bus, subject: handled}
`

// TestNATSClusterNodeKilled runs `sluice serve` against a three-node JetStream cluster (R3
// streams), with a source consuming 600 requests from one stream and the outbox publishing each
// request's outcome to another. Mid-run, the node leading the outcome stream is SIGKILLed and,
// once the work went on without it, restarted. Afterwards: one job per request id, every
// request acknowledged, the outcome stream holds exactly 600 messages with 600 distinct ids
// (a republish after the failover was dropped by Nats-Msg-Id), and a durable consumer of the
// outcomes, connected to all three nodes throughout, saw every one.
func TestNATSClusterNodeKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("nats cluster: skipped in -short")
	}
	cluster := natstest.StartCluster(t, 3)
	const requests = 600
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	wf := filepath.Join(dir, "handle.yaml")
	if err := os.WriteFile(wf, []byte(relayWorkflow), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(binary, "workflow", "apply", "--data", data, wf).CombinedOutput(); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	ctx := t.Context()
	nc, err := nats.Connect(cluster.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	for _, sc := range []jetstream.StreamConfig{
		{Name: "REQ", Subjects: []string{"req.>"}, Replicas: 3},
		{Name: "OUT", Subjects: []string{"out.>"}, Replicas: 3, Duplicates: 2 * time.Minute},
	} {
		if _, err := js.CreateStream(ctx, sc); err != nil {
			t.Fatalf("create stream %s: %v", sc.Name, err)
		}
	}
	for i := range requests {
		m := nats.NewMsg("req.in")
		m.Data = fmt.Appendf(nil, `{"request": %d}`, i)
		if _, err := js.PublishMsg(ctx, m, jetstream.WithMsgID(fmt.Sprintf("req-%04d", i))); err != nil {
			t.Fatal(err)
		}
	}
	dedup := consumeDedup(t, cluster.URL(), "OUT", "out.>", 3)

	stop, out := serve(t, "--data", data, "--listen", "", "--source-ack-wait", "2s",
		"--source", "req="+cluster.URL()+"/req.in?stream=REQ&replicas=3&workflow=handle-request",
		"--sink", "bus="+cluster.URL()+"/out?stream=OUT&replicas=3")
	outInfo := func() (*jetstream.StreamInfo, error) {
		s, err := js.Stream(ctx, "OUT")
		if err != nil {
			return nil, err
		}
		return s.Info(ctx)
	}
	stored := func(at uint64) func() (bool, string) {
		return func() (bool, string) {
			info, err := outInfo()
			if err != nil {
				return false, err.Error()
			}
			return info.State.Msgs >= at, fmt.Sprintf("%d outcomes stored", info.State.Msgs)
		}
	}
	poll.Until(t, 60*time.Second, "a sixth of the outcomes published", stored(requests/6))
	info, err := outInfo()
	if err != nil {
		t.Fatal(err)
	}
	var victim *natstest.Server
	for i, n := range cluster.Nodes {
		if info.Cluster != nil && info.Cluster.Leader == fmt.Sprintf("n%d", i+1) {
			victim = n
		}
	}
	if victim == nil {
		t.Fatalf("no leader of stream OUT among the nodes: %+v", info.Cluster)
	}
	killedAt := info.State.Msgs
	victim.Kill()
	killed := time.Now()
	poll.Until(t, 60*time.Second, "publishing to go on without the killed node", stored(killedAt+requests/6))
	resumed := time.Since(killed)
	victim.Restart()
	poll.Until(t, 120*time.Second, "every request acknowledged", allAcked(t, js, "REQ", "sluice-req"))
	poll.Until(t, 60*time.Second, "every outcome stored", stored(requests))
	poll.Until(t, 60*time.Second, "the consumer to see every outcome", func() (bool, string) {
		distinct, received := dedup.seen()
		return distinct >= requests, fmt.Sprintf("%d distinct of %d received", distinct, received)
	})
	stop(true)

	jobs, _ := sourceJobs(t, data, "req")
	if len(jobs) != requests {
		t.Fatalf("%d jobs, want %d\n%s", len(jobs), requests, out.String())
	}
	for id, n := range jobs {
		if n != 1 {
			t.Fatalf("message %s made %d jobs", id, n)
		}
	}
	info, err = outInfo()
	if err != nil {
		t.Fatal(err)
	}
	ids := storedIDs(t, js, "OUT", info.State.Msgs, nil)
	if info.State.Msgs != requests || len(ids) != requests {
		t.Fatalf("stream OUT holds %d messages with %d distinct ids; want exactly %d", info.State.Msgs, len(ids), requests)
	}
	distinct, received := dedup.seen()
	if distinct != requests {
		t.Fatalf("the consumer saw %d distinct outcomes, want %d", distinct, requests)
	}
	t.Logf("killed the leader of OUT after %d outcomes; %d more stored %v after the kill; consumer: %d distinct of %d received",
		killedAt, requests/6, resumed.Round(time.Millisecond), distinct, received)
}

// storedIDs reads every message of a stream with an ordered consumer and returns their
// Nats-Msg-Id, failing on an id stored twice or a message check refuses (check may be nil).
func storedIDs(t *testing.T, js jetstream.JetStream, stream string, msgs uint64, check func(jetstream.Msg) error) map[string]bool {
	t.Helper()
	oc, err := js.OrderedConsumer(t.Context(), stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for len(ids) < int(msgs) {
		batch, err := oc.Fetch(1000, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			id := m.Headers().Get(jetstream.MsgIDHeader)
			if ids[id] {
				t.Fatalf("stream %s holds message %s twice", stream, id)
			}
			if check != nil {
				if err := check(m); err != nil {
					t.Fatalf("stream %s, message %s: %v", stream, id, err)
				}
			}
			ids[id] = true
		}
		if n == 0 {
			break
		}
	}
	return ids
}

// allAcked is a poll condition: the durable consumer has nothing pending or unacknowledged.
func allAcked(t *testing.T, js jetstream.JetStream, stream, durable string) func() (bool, string) {
	return func() (bool, string) {
		c, err := js.Consumer(t.Context(), stream, durable)
		if err != nil {
			return false, err.Error()
		}
		ci, err := c.Info(t.Context())
		if err != nil {
			return false, err.Error()
		}
		return ci.NumPending == 0 && ci.NumAckPending == 0, fmt.Sprintf("%d pending, %d unacknowledged", ci.NumPending, ci.NumAckPending)
	}
}
