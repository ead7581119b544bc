package watch_test

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sluice-project/sluice/internal/blob/blobtest"
	"github.com/sluice-project/sluice/internal/store/drivertest"
	"github.com/sluice-project/sluice/internal/watch"
)

// TestS3Prefix watches a prefix of a bucket on a real S3 server (versitygw): each object
// becomes one job once, tagged with it; a later scan lists only the keys after the stored
// cursor, so an object put under a key that sorts before it waits for the full listing of the
// rescan; a restarted watcher makes no second job; move-done moves objects under done/.
func TestS3Prefix(t *testing.T) {
	t.Parallel()
	endpoint, _ := blobtest.VersityGW(t, "watchkey", "watchsecret")
	c := blobtest.S3Client(endpoint, "watchkey", "watchsecret")
	blobtest.PutObjects(t, c, "drop", map[string]string{"in/b.mov": "video b", "in/c.mov": "video c", "other/x": "not watched"})
	s := newSetup(t, drivertest.OpenSQLite)
	bucket, err := blobtest.S3Opener(endpoint, "watchkey", "watchsecret")(t.Context(), "s3://drop/in")
	if err != nil {
		t.Fatal(err)
	}
	watcher := func(edit func(*watch.Config)) *watch.Watcher {
		return s.watcher(t, time.Second, func(cfg *watch.Config) {
			cfg.Location, cfg.Bucket, cfg.TagDone, cfg.Rescan = "s3://drop/in", bucket, true, time.Hour
			if edit != nil {
				edit(cfg)
			}
		})
	}
	w := watcher(nil)
	if r := scan(t, w); r.Waiting != 2 {
		t.Fatalf("first sight: %+v", r)
	}
	s.clock.add(time.Second)
	if r := scan(t, w); r.Taken != 2 {
		t.Fatalf("settled: %+v", r)
	}
	tags, err := bucket.ObjectTags(t.Context(), "b.mov")
	if err != nil || tags["sluice-job"] == "" {
		t.Fatalf("b.mov's tags: %v %v", tags, err)
	}
	put := func(key, content string) {
		t.Helper()
		if _, err := c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("drop"), Key: aws.String(key),
			Body: strings.NewReader(content)}); err != nil {
			t.Fatal(err)
		}
	}
	put("in/d.mov", "video d") // after the cursor (c.mov)
	put("in/a.mov", "video a") // before it
	scan(t, w)
	s.clock.add(time.Second)
	if r := scan(t, w); r.Taken != 1 {
		t.Fatalf("after the cursor only d.mov: %+v", r)
	}
	if roots, _ := watchJobs(t, s.kit.Store); roots["a.mov"] != 0 {
		t.Fatal("a.mov taken without a full listing")
	}
	s.clock.add(time.Hour) // the rescan is due
	scan(t, w)
	s.clock.add(time.Second)
	if r := scan(t, w); r.Taken != 1 {
		t.Fatalf("the rescan finds a.mov: %+v", r)
	}
	// A restart: a new watcher, a full listing of objects all taken.
	again := watcher(nil)
	scan(t, again)
	s.clock.add(time.Second)
	scan(t, again)
	roots, jobs := watchJobs(t, s.kit.Store)
	if jobs != 4 || roots["a.mov"] != 1 || roots["b.mov"] != 1 || roots["c.mov"] != 1 || roots["d.mov"] != 1 {
		t.Fatalf("jobs %d, roots %v: want one per object", jobs, roots)
	}

	mover := watcher(func(cfg *watch.Config) { cfg.Location, cfg.TagDone, cfg.MoveDone = "s3://drop/in", false, true })
	put("in/e.mov", "video e")
	scan(t, mover)
	s.clock.add(time.Second)
	if r := scan(t, mover); r.Taken < 1 {
		t.Fatalf("move-done: %+v", r)
	}
	if _, err := c.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String("drop"), Key: aws.String("in/done/e.mov")}); err != nil {
		t.Fatalf("e.mov not under done/: %v", err)
	}
	if _, err := c.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String("drop"), Key: aws.String("in/e.mov")}); err == nil {
		t.Fatal("e.mov still in the prefix")
	}
	if roots, _ := watchJobs(t, s.kit.Store); roots["e.mov"] != 1 || roots["done/e.mov"] != 0 {
		t.Fatalf("roots %v", roots)
	}
}
