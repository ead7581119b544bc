package outbox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-project/sluice/internal/action/basic"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/natstest"
	"github.com/sluice-project/sluice/internal/outbox"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/sink"
)

const benchItems = 2000

// BenchmarkTopics measures outcomes per second: a job of 2,000 one-step items with no publish
// rule (engine), the same publishing each outcome through the outbox to JetStream until the
// stream holds them all (outbox), and a plain nats.go loop publishing as many messages with ids
// asynchronously (publish-loop), per store driver, against the machine's NATS server.
func BenchmarkTopics(b *testing.B) {
	url := natstest.Shared(b)
	nc, err := nats.Connect(url)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	ctx := context.Background()
	stream := fmt.Sprintf("BENCH_%d", time.Now().UnixNano())
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{stream + ".>"}}); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = js.DeleteStream(context.Background(), stream) }()
	msgs := func() uint64 {
		s, err := js.Stream(ctx, stream)
		if err != nil {
			b.Fatal(err)
		}
		return s.CachedInfo().State.Msgs
	}
	report := func(b *testing.B, start time.Time, n int) {
		b.ReportMetric(float64(n)/time.Since(start).Seconds(), "outcomes/s")
	}
	for _, publish := range []bool{false, true} {
		name := "engine"
		if publish {
			name = "outbox"
		}
		b.Run(name, func(b *testing.B) {
			for _, drv := range []struct {
				name string
				open enginetest.Open
			}{{"sqlite", drivertestSQLite}, {"postgres", drivertestPostgres}} {
				b.Run(drv.name, func(b *testing.B) {
					k := enginetest.Start(b, drv.open, basic.NewNoop())
					var o *outbox.Outbox
					wf := "name: bench-pub\nsteps:\n  s: {action: noop, needs: [start]}\n"
					if publish {
						s, err := sink.Open(ctx, url+"/"+stream, sink.Options{})
						if err != nil {
							b.Fatal(err)
						}
						o = outbox.New(outbox.Config{Store: k.Store, Sinks: map[string]sink.Sink{"bus": s}, PollInterval: 10 * time.Millisecond})
						if err := o.Register(ctx, k.Engine); err != nil {
							b.Fatal(err)
						}
						o.Start(ctx)
						defer o.Stop()
						wf = "name: bench-pub\nsteps:\n  s: {action: noop, needs: [start], publish: [{sink: bus, subject: " + drv.name + "}]}\n"
					}
					roots := make([]engine.Root, benchItems)
					for i := range roots {
						roots[i] = engine.Root{Ordinal: i, Name: fmt.Sprint(i)}
					}
					total := 0
					start := time.Now()
					for b.Loop() {
						before := msgs()
						// Open until every root is added: a job of more than one batch of
						// roots could otherwise complete before the last ones.
						k.ApplyWorkflow(b, wf)
						job, _, err := k.Engine.CreateJob(ctx, engine.CreateJobParams{Workflow: "bench-pub", Open: true})
						if err != nil {
							b.Fatal(err)
						}
						if err := k.Engine.AddRoots(ctx, job, roots); err != nil {
							b.Fatal(err)
						}
						if err := k.Engine.Seal(ctx, job.ID); err != nil {
							b.Fatal(err)
						}
						if j := k.WaitJob(b, job.ID, 5*time.Minute); j.State != record.JobComplete {
							b.Fatalf("job %s", j.State)
						}
						if publish {
							poll.Until(b, time.Minute, "the outcomes in the stream", func() (bool, string) {
								n := msgs()
								st, _ := o.Status(ctx)
								return n >= before+benchItems, fmt.Sprintf("%d: %+v", n-before, st)
							})
						}
						total += benchItems
					}
					report(b, start, total)
				})
			}
		})
	}
	b.Run("publish-loop", func(b *testing.B) {
		total := 0
		start := time.Now()
		for b.Loop() {
			futures := make([]jetstream.PubAckFuture, 0, benchItems)
			for i := range benchItems {
				m := nats.NewMsg(stream + ".loop")
				m.Data = make([]byte, 600) // about an outcome's body
				m.Header.Set("status", "ok")
				f, err := js.PublishMsgAsync(m, jetstream.WithMsgID(fmt.Sprintf("loop-%d-%d", total, i)))
				if err != nil {
					b.Fatal(err)
				}
				futures = append(futures, f)
			}
			for _, f := range futures {
				select {
				case <-f.Ok():
				case err := <-f.Err():
					b.Fatal(err)
				}
			}
			total += benchItems
		}
		report(b, start, total)
	})
}
