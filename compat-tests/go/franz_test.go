package compat

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func franzCodec(name string) kgo.CompressionCodec {
	switch name {
	case "gzip":
		return kgo.GzipCompression()
	case "snappy":
		return kgo.SnappyCompression()
	case "lz4":
		return kgo.Lz4Compression()
	case "zstd":
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}

func franzAdmin(t *testing.T) *kadm.Client {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

func franzCreate(t *testing.T, adm *kadm.Client, topic string, parts int32, configs map[string]*string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopics(ctx, parts, 1, configs, topic)
	if err != nil {
		t.Fatalf("CreateTopics %s: %v", topic, err)
	}
	if r := resp[topic]; r.Err != nil {
		t.Fatalf("CreateTopics %s: %v", topic, r.Err)
	}
	// Wait until every partition answers ListOffsets: Kafka answers CreateTopics before the
	// broker has created the partitions, and drops acks=0 records sent in between
	// (FINDINGS.md).
	for {
		ends, err := adm.ListEndOffsets(ctx, topic)
		ready := err == nil
		for p := int32(0); ready && p < parts; p++ {
			o, ok := ends.Lookup(topic, p)
			ready = ok && o.Err == nil
		}
		if ready {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("partitions of %s not ready within 30 s: %v", topic, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// franzProduce sends every record and returns the offsets the acks reported.
func franzProduce(t *testing.T, topic, codec, mode string, records []sent) []int64 {
	t.Helper()
	opts := []kgo.Opt{
		kgo.SeedBrokers(bootstrap(t)),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(franzCodec(codec)),
		kgo.ProducerLinger(5 * time.Millisecond),
		// No kgo.RecordDeliveryTimeout: franz-go measures it from Record.Timestamp, and these
		// timestamps are ten minutes old. The produce context bounds the wait instead.
	}
	switch mode {
	case "acks0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	case "acks1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case "acksall":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite())
	case "acksall-idempotent":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	offsets := make([]int64, len(records))
	var mu sync.Mutex
	var firstErr error
	for i, s := range records {
		r := &kgo.Record{Topic: topic, Partition: s.partition, Key: s.key, Value: s.value, Timestamp: time.UnixMilli(s.timestamp)}
		for _, h := range s.headers {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.key, Value: h.value})
		}
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = fmt.Errorf("record %d: %w", i, err)
			}
			offsets[i] = r.Offset
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if firstErr != nil {
		t.Fatalf("produce: %v", firstErr)
	}
	return offsets
}

// franzConsume reads each partition from the start until it holds want[p] records.
func franzConsume(t *testing.T, topic string, want map[int32]int) map[int32][]got {
	t.Helper()
	assign := map[int32]kgo.Offset{}
	for p := range want {
		assign[p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap(t)),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: assign}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out := map[int32][]got{}
	done := func() bool {
		for p, n := range want {
			if len(out[p]) < n {
				return false
			}
		}
		return true
	}
	for !done() {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consume timed out: have %v of %v", counts(out), want)
		}
		fetches.EachError(func(tp string, p int32, err error) {
			t.Fatalf("fetch %s/%d: %v", tp, p, err)
		})
		fetches.EachRecord(func(r *kgo.Record) {
			g := got{offset: r.Offset, key: r.Key, value: r.Value, timestamp: r.Timestamp.UnixMilli(),
				createTs: r.Attrs.TimestampType() == 0}
			for _, h := range r.Headers {
				g.headers = append(g.headers, header{h.Key, h.Value})
			}
			out[r.Partition] = append(out[r.Partition], g)
		})
	}
	return out
}

func counts(m map[int32][]got) map[int32]int {
	c := map[int32]int{}
	for p, rs := range m {
		c[p] = len(rs)
	}
	return c
}

func TestFranzProduceConsume(t *testing.T) {
	for _, codec := range codecs {
		for _, mode := range modes {
			t.Run(codec+"/"+mode, func(t *testing.T) {
				adm := franzAdmin(t)
				topic := topicName("franz", codec+"-"+mode)
				franzCreate(t, adm, topic, partitions, nil)
				records := makeRecords(recordCount(), baseTimestamp())
				acked := franzProduce(t, topic, codec, mode, records)
				pos := positions(records)
				want := map[int32]int{}
				for p, idx := range pos {
					want[p] = len(idx)
					if mode == "acks0" {
						continue
					}
					for j, i := range idx {
						if acked[i] != int64(j) {
							t.Fatalf("record %d acked at offset %d of partition %d, want %d", i, acked[i], p, j)
						}
					}
				}
				gots := franzConsume(t, topic, want)
				for p, idx := range pos {
					compare(t, records, idx, p, gots[p])
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				ends, err := adm.ListEndOffsets(ctx, topic)
				if err != nil {
					t.Fatal(err)
				}
				for p, n := range want {
					if o, _ := ends.Lookup(topic, p); o.Err != nil || o.Offset != int64(n) {
						t.Errorf("end offset of partition %d: %d (%v), want %d", p, o.Offset, o.Err, n)
					}
				}
			})
		}
	}
}

func TestFranzAdmin(t *testing.T) {
	adm := franzAdmin(t)
	topic := topicName("franz", "admin")
	v := "2000000"
	franzCreate(t, adm, topic, partitions, map[string]*string{"max.message.bytes": &v})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	again, err := adm.CreateTopics(ctx, partitions, 1, nil, topic)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(again[topic].Err, kerr.TopicAlreadyExists) {
		t.Errorf("second CreateTopics: %v, want TOPIC_ALREADY_EXISTS", again[topic].Err)
	}

	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	td := md.Topics[topic]
	if td.Err != nil || len(td.Partitions) != partitions {
		t.Fatalf("metadata for %s: err %v, %d partitions", topic, td.Err, len(td.Partitions))
	}
	if td.ID == (kadm.TopicID{}) {
		t.Errorf("metadata: zero topic id")
	}
	for p, pd := range td.Partitions {
		if pd.Leader < 0 || len(pd.Replicas) != 1 || pd.Replicas[0] != pd.Leader || len(pd.ISR) != 1 {
			t.Errorf("partition %d: leader %d replicas %v isr %v", p, pd.Leader, pd.Replicas, pd.ISR)
		}
	}
	if len(md.Brokers) != 1 {
		t.Errorf("metadata brokers: %v, want exactly one", md.Brokers)
	}

	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("DescribeConfigs %s: %v %v", topic, err, rc.Err)
	}
	if len(rc.Configs) < 20 {
		t.Errorf("DescribeConfigs: %d entries, want >= 20", len(rc.Configs))
	}
	byName := map[string]kadm.Config{}
	for _, c := range rc.Configs {
		byName[c.Key] = c
	}
	check := func(name, value string, source kmsg.ConfigSource) {
		c, ok := byName[name]
		if !ok {
			t.Errorf("DescribeConfigs: %s missing", name)
			return
		}
		if c.Value == nil || *c.Value != value || c.Source != source {
			t.Errorf("DescribeConfigs %s = %v (source %v), want %s (source %v)", name, c.MaybeValue(), c.Source, value, source)
		}
	}
	check("max.message.bytes", "2000000", kmsg.ConfigSourceDynamicTopicConfig)
	check("cleanup.policy", "delete", kmsg.ConfigSourceDefaultConfig)
	check("retention.ms", "604800000", kmsg.ConfigSourceDefaultConfig)

	del, err := adm.DeleteTopics(ctx, topic)
	if err != nil || del[topic].Err != nil {
		t.Errorf("DeleteTopics: %v %v", err, del[topic].Err)
	}
}

func TestFranzListOffsetsByTimestamp(t *testing.T) {
	adm := franzAdmin(t)
	topic := topicName("franz", "list-offsets")
	franzCreate(t, adm, topic, 1, nil)
	const n = 200
	base := baseTimestamp()
	records := make([]sent, n)
	for i := range records {
		records[i] = sent{key: []byte(fmt.Sprintf("k%d", i)), value: []byte(fmt.Sprintf("v%d", i)), timestamp: base + 10*int64(i)}
	}
	franzProduce(t, topic, "none", "acksall-idempotent", records)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// kadm answers "no offset at or after" with the end offset (its documented behaviour).
	cases := []struct{ ts, offset int64 }{
		{base - 1000, 0}, {base, 0}, {base + 1, 1}, {base + 570, 57}, {base + 575, 58},
		{base + 10*(n-1), n - 1}, {base + 10*n, n},
	}
	for _, c := range cases {
		lo, err := adm.ListOffsetsAfterMilli(ctx, c.ts, topic)
		if err != nil {
			t.Fatal(err)
		}
		o, ok := lo.Lookup(topic, 0)
		if !ok || o.Err != nil || o.Offset != c.offset {
			t.Errorf("ListOffsets at base+%d: offset %d (%v), want %d", c.ts-base, o.Offset, o.Err, c.offset)
			continue
		}
		if c.offset < n && o.Timestamp != records[c.offset].timestamp {
			t.Errorf("ListOffsets at base+%d: timestamp %d, want %d", c.ts-base, o.Timestamp, records[c.offset].timestamp)
		}
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup(topic, 0); o.Offset != 0 {
		t.Errorf("earliest: %d, want 0", o.Offset)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup(topic, 0); o.Offset != n {
		t.Errorf("latest: %d, want %d", o.Offset, n)
	}
}
