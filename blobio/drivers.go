package blobio

// The bucket schemes imgpipe serves: s3:// (AWS S3 and compatible stores), gs:// (Google
// Cloud Storage), azblob:// (Azure Blob Storage) and file:// (a local folder, for tests
// and shared file systems). Each driver registers its scheme with blob.OpenBucket.
import (
	_ "gocloud.dev/blob/azureblob"
	_ "gocloud.dev/blob/fileblob"
	_ "gocloud.dev/blob/gcsblob"
	_ "gocloud.dev/blob/s3blob"
)
