package blobio_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/imgpipe/imgpipe/blobio"
	"github.com/imgpipe/imgpipe/pipeline"
)

// Without a cloud driver imported, only file:// is there; a cloud URL says how to get its
// driver.
func ExampleOpenStore() {
	fmt.Println(blobio.Schemes())
	_, err := blobio.OpenStore(context.Background(), "s3://photos")
	fmt.Println(err != nil)

	dir, _ := os.MkdirTemp("", "bucket")
	defer os.RemoveAll(dir)
	os.WriteFile(filepath.Join(dir, "a.png"), []byte("not decoded here"), 0o644)
	store, err := blobio.OpenStore(context.Background(), "file://"+filepath.ToSlash(dir))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	in, _ := store.Source("", pipeline.Selection{}).Next(context.Background())
	fmt.Println(in.Name)
	// Output:
	// [file]
	// true
	// a.png
}
