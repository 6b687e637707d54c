// Command workflow shows a skiplock workflow from Go: it resizes 100 images (fan-out), then
// builds one archive from their results (fan-in), and waits for the archive's result.
//
//	DATABASE_URL=postgres://localhost/app go run ./examples/workflow
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skiplock/skiplock"
	"github.com/skiplock/skiplock/driver"
)

// ResizeImage is the payload of each resize step; Thumbnail is its result.
type ResizeImage struct {
	Image int `json:"image"`
	Width int `json:"width"`
}

type Thumbnail struct {
	Path string `json:"path"`
}

// Archive is the result of the fan-in step.
type Archive struct {
	Name  string   `json:"name"`
	Files []string `json:"files"`
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, os.Getenv("DATABASE_URL")); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, url string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	err = skiplock.Migrate(ctx, conn, nil)
	conn.Close(ctx)
	if err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return err
	}
	defer pool.Close()

	// The graph: 100 resizes, and an archive step that depends on all of them.
	var steps []driver.WorkflowStep
	var resizes []string
	for i := 1; i <= 100; i++ {
		name := fmt.Sprintf("resize-%d", i)
		resizes = append(resizes, name)
		steps = append(steps, driver.WorkflowStep{
			Name: name, Kind: "resize_image", Queue: "images", Payload: ResizeImage{Image: i, Width: 256},
		})
	}
	steps = append(steps, driver.WorkflowStep{
		Name: "archive", Kind: "build_archive", Queue: "archives", DependsOn: resizes, NotifyFinished: true,
	})
	ids, err := driver.EnqueueWorkflow(ctx, pool, steps)
	if err != nil {
		return err
	}
	fmt.Printf("enqueued workflow %d: %d steps\n", ids["resize-1"], len(ids))

	handlers := driver.NewHandlers()
	driver.AddHandler(handlers, "resize_image", func(ctx context.Context, job *driver.Job[ResizeImage]) error {
		// A real handler would resize the image here; what it returns is the job's result.
		return job.SetResult(Thumbnail{Path: fmt.Sprintf("thumbs/%d-%d.jpg", job.Payload.Image, job.Payload.Width)})
	}, nil)
	driver.AddHandler(handlers, "build_archive", func(ctx context.Context, job *driver.Job[struct{}]) error {
		// Every parent's result, by step name.
		archive := Archive{Name: "thumbs.zip"}
		for _, raw := range job.ParentResults {
			var t Thumbnail
			if err := json.Unmarshal(raw, &t); err != nil {
				return err
			}
			archive.Files = append(archive.Files, t.Path)
		}
		sort.Strings(archive.Files)
		return job.SetResult(archive)
	}, nil)
	client, err := driver.NewClient(pool, &driver.Config{
		Queues:   map[string]driver.QueueConfig{"images": {Slots: 10}, "archives": {Slots: 1}},
		Handlers: handlers,
	})
	if err != nil {
		return err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = client.Run(runCtx) }()

	// Any process can wait for the archive: LISTEN jobs_finished, with a poll as safety net.
	r, err := driver.WaitResult(ctx, pool, ids["archive"])
	if err != nil {
		return err
	}
	var archive Archive
	if err := json.Unmarshal(r.Result, &archive); err != nil {
		return err
	}
	fmt.Printf("archive %s: %s with %d files, the first %s\n", r.State, archive.Name, len(archive.Files), archive.Files[0])
	return client.Stop(ctx)
}
