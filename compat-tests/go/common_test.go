// Package compat runs franz-go and Sarama against the broker at STROM_COMPAT_BOOTSTRAP
// (`strom serve` or Apache Kafka; compat-tests/run-clients.sh runs the same tests against
// both). No consumer groups: partitions are assigned by hand and nothing is committed.
package compat

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
)

const partitions = 3

var (
	codecs = []string{"none", "gzip", "snappy", "lz4", "zstd"}
	// acks and idempotence: idempotence needs acks=all, so it is off for acks 0 and 1.
	modes = []string{"acks0", "acks1", "acksall", "acksall-idempotent"}
)

func bootstrap(t testing.TB) string {
	b := os.Getenv("STROM_COMPAT_BOOTSTRAP")
	if b == "" {
		t.Fatal("STROM_COMPAT_BOOTSTRAP is not set (run through compat-tests/run-clients.sh)")
	}
	return b
}

func recordCount() int {
	if v := os.Getenv("STROM_COMPAT_CLIENT_RECORDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err == nil && n > 0 {
			return n
		}
	}
	return 2000
}

func topicName(client, what string) string {
	return fmt.Sprintf("go-%s-%s-%08x", client, what, rand.Uint32())
}

type header struct {
	key   string
	value []byte // nil is a null header value
}

// sent is one record as produced: what the consumer must give back byte for byte.
type sent struct {
	partition int32
	key       []byte // nil is a null key
	value     []byte // nil is a null value
	timestamp int64  // ms, CreateTime
	headers   []header
}

// baseTimestamp is ten minutes in the past: explicit, yet recent enough for retention.
func baseTimestamp() int64 { return time.Now().Add(-10 * time.Minute).UnixMilli() }

// makeRecords builds the record shapes every language's suite sends: null and empty keys
// and values, no/one/repeated/empty/null-valued headers, incompressible and compressible
// values and one of 100 KB.
func makeRecords(n int, base int64) []sent {
	out := make([]sent, n)
	for i := 0; i < n; i++ {
		r := sent{partition: int32(i % partitions), timestamp: base + int64(i)}
		switch i % 7 {
		case 0:
		case 1:
			r.key = []byte{}
		default:
			r.key = []byte(fmt.Sprintf("key-%d", i))
		}
		switch {
		case i%11 == 0:
		case i%11 == 1:
			r.value = []byte{}
		case i%13 == 5:
			r.value = bytes.Repeat([]byte("compressible "), 150)
		case i == 17:
			r.value = pseudoRandom(i, 100_000)
		default:
			r.value = pseudoRandom(i, 1+(i*37)%300)
		}
		switch i % 5 {
		case 1:
			r.headers = []header{{"h", []byte(fmt.Sprintf("v-%d", i))}}
		case 2:
			r.headers = []header{{"dup", []byte("a")}, {"dup", []byte("b")}}
		case 3:
			r.headers = []header{{"empty", []byte{}}}
		case 4:
			r.headers = []header{{"null-value", nil}}
		}
		out[i] = r
	}
	return out
}

func pseudoRandom(seed, n int) []byte {
	b := make([]byte, n)
	x := uint64(0x9E3779B97F4A7C15) ^ uint64(seed)
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
	return b
}

// sameBytes compares byte for byte and tells null from empty.
func sameBytes(a, b []byte) bool {
	return (a == nil) == (b == nil) && bytes.Equal(a, b)
}

func describeBytes(b []byte) string {
	if b == nil {
		return "null"
	}
	if len(b) > 24 {
		return fmt.Sprintf("%d bytes %x…", len(b), b[:24])
	}
	return fmt.Sprintf("%q", b)
}

// got is one consumed record in a client-neutral shape.
type got struct {
	offset    int64
	key       []byte
	value     []byte
	timestamp int64
	createTs  bool // the timestamp type is CreateTime (where the client exposes it)
	headers   []header
}

// positions groups record indexes by partition, in the order they were sent: the record
// at offset j of partition p must be records[positions[p][j]].
func positions(records []sent) map[int32][]int {
	pos := map[int32][]int{}
	for i, r := range records {
		pos[r.partition] = append(pos[r.partition], i)
	}
	return pos
}

// compare checks one partition's consumed records against what was sent, reporting the
// first few differences.
func compare(t *testing.T, records []sent, pos []int, part int32, gots []got) {
	t.Helper()
	if len(gots) != len(pos) {
		t.Errorf("partition %d: consumed %d records, produced %d", part, len(gots), len(pos))
	}
	errs := 0
	for j := 0; j < len(gots) && j < len(pos) && errs < 10; j++ {
		s, g := records[pos[j]], gots[j]
		where := fmt.Sprintf("partition %d offset %d (record %d)", part, j, pos[j])
		bad := func(format string, args ...any) {
			errs++
			t.Errorf(where+": "+format, args...)
		}
		if g.offset != int64(j) {
			bad("offset %d, want %d (offsets must be contiguous from 0)", g.offset, j)
		}
		if !sameBytes(s.key, g.key) {
			bad("key %s, want %s", describeBytes(g.key), describeBytes(s.key))
		}
		if !sameBytes(s.value, g.value) {
			bad("value %s, want %s", describeBytes(g.value), describeBytes(s.value))
		}
		if g.timestamp != s.timestamp {
			bad("timestamp %d, want %d", g.timestamp, s.timestamp)
		}
		if !g.createTs {
			bad("timestamp type is not CreateTime")
		}
		if len(g.headers) != len(s.headers) {
			bad("%d headers, want %d", len(g.headers), len(s.headers))
			continue
		}
		for h := range s.headers {
			if g.headers[h].key != s.headers[h].key || !sameBytes(g.headers[h].value, s.headers[h].value) {
				bad("header %d = %q:%s, want %q:%s", h, g.headers[h].key, describeBytes(g.headers[h].value),
					s.headers[h].key, describeBytes(s.headers[h].value))
			}
		}
	}
}
