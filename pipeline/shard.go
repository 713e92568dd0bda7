package pipeline

import (
	"context"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
)

// MaxShards bounds N in a shard I/N.
const MaxShards = 1 << 20

// ParseShard parses a shard written "I/N" (0 ≤ I < N ≤ MaxShards): the I-th of N disjoint
// parts of the inputs, counting from 0 as Kubernetes' JOB_COMPLETION_INDEX does.
func ParseShard(s string) (i, n int, err error) {
	a, b, ok := strings.Cut(s, "/")
	if ok {
		i, err = strconv.Atoi(a)
		if err == nil {
			n, err = strconv.Atoi(b)
		}
	}
	if !ok || err != nil || n < 1 || n > MaxShards || i < 0 || i >= n {
		return 0, 0, fmt.Errorf("shard %q: want I/N with 0 <= I < N <= %d, e.g. 0/4", s, MaxShards)
	}
	return i, n, nil
}

// ShardOf returns the shard, out of n, of an input: the 64-bit FNV-1a hash of its name
// (the relative, slash-separated path, as UTF-8 bytes) modulo n. The hash depends on the
// name alone, so every machine puts an input in the same shard whatever it sees of the
// rest of the folder, and the split is even for any n.
func ShardOf(name string, n int) int {
	h := fnv.New64a()
	h.Write([]byte(name))
	return int(h.Sum64() % uint64(n))
}

// Shard wraps src, passing on only the inputs of shard i out of n (see ShardOf). The
// shards of one folder are disjoint and together hold every input; MergeReports joins
// their reports. Inputs the source marks failed (Input.Err) are sharded like the others.
func Shard(src Source, i, n int) Source { return &shardSource{src: src, i: i, n: n} }

type shardSource struct {
	src  Source
	i, n int
}

func (s *shardSource) Next(ctx context.Context) (Input, error) {
	for {
		in, err := s.src.Next(ctx)
		if err != nil || ShardOf(in.Name, s.n) == s.i {
			return in, err
		}
	}
}
