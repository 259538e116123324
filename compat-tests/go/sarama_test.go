package compat

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

func saramaConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.ClientID = "strom-compat-sarama"
	// The newest protocol versions Sarama knows; Strom must serve them.
	cfg.Version = sarama.V4_0_0_0
	cfg.Net.DialTimeout = 10 * time.Second
	cfg.Net.ReadTimeout = 30 * time.Second
	cfg.Metadata.Retry.Max = 10
	cfg.Metadata.Retry.Backoff = 200 * time.Millisecond
	return cfg
}

func saramaCodec(name string) sarama.CompressionCodec {
	switch name {
	case "gzip":
		return sarama.CompressionGZIP
	case "snappy":
		return sarama.CompressionSnappy
	case "lz4":
		return sarama.CompressionLZ4
	case "zstd":
		return sarama.CompressionZSTD
	}
	return sarama.CompressionNone
}

func saramaAdmin(t *testing.T) sarama.ClusterAdmin {
	adm, err := sarama.NewClusterAdmin([]string{bootstrap(t)}, saramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = adm.Close() })
	return adm
}

func saramaCreate(t *testing.T, adm sarama.ClusterAdmin, topic string, parts int32, configs map[string]*string) {
	t.Helper()
	if err := adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: parts, ReplicationFactor: 1, ConfigEntries: configs}, false); err != nil {
		t.Fatalf("CreateTopic %s: %v", topic, err)
	}
	// Wait until every partition answers ListOffsets: Kafka answers CreateTopics before the
	// broker has created the partitions, and drops acks=0 records sent in between
	// (FINDINGS.md).
	client, err := sarama.NewClient([]string{bootstrap(t)}, saramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	deadline := time.Now().Add(30 * time.Second)
	for p := int32(0); p < parts; {
		_ = client.RefreshMetadata(topic)
		if _, err := client.GetOffset(topic, p, sarama.OffsetNewest); err == nil {
			p++
			continue
		} else if time.Now().After(deadline) {
			t.Fatalf("partition %d of %s not ready within 30 s: %v", p, topic, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func bytesEncoder(b []byte) sarama.Encoder {
	if b == nil {
		return nil // a null key or value
	}
	return sarama.ByteEncoder(b)
}

// saramaProduce sends every record through an AsyncProducer and returns the offsets the
// acks reported.
func saramaProduce(t *testing.T, topic, codec, mode string, records []sent) []int64 {
	t.Helper()
	cfg := saramaConfig()
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.Compression = saramaCodec(codec)
	cfg.Producer.Flush.Frequency = 5 * time.Millisecond
	cfg.Producer.MaxMessageBytes = 1_000_000
	switch mode {
	case "acks0":
		cfg.Producer.RequiredAcks = sarama.NoResponse
	case "acks1":
		cfg.Producer.RequiredAcks = sarama.WaitForLocal
	case "acksall":
		cfg.Producer.RequiredAcks = sarama.WaitForAll
	case "acksall-idempotent":
		cfg.Producer.RequiredAcks = sarama.WaitForAll
		cfg.Producer.Idempotent = true
		cfg.Net.MaxOpenRequests = 1 // Sarama requires it for idempotence
	}
	p, err := sarama.NewAsyncProducer([]string{bootstrap(t)}, cfg)
	if err != nil {
		t.Fatalf("producer: %v", err)
	}
	offsets := make([]int64, len(records))
	done := make(chan error, 1)
	go func() {
		var firstErr error
		for n := 0; n < len(records); n++ {
			select {
			case m := <-p.Successes():
				offsets[m.Metadata.(int)] = m.Offset
			case e := <-p.Errors():
				if firstErr == nil {
					firstErr = fmt.Errorf("record %v: %w", e.Msg.Metadata, e.Err)
				}
			case <-time.After(90 * time.Second):
				done <- fmt.Errorf("no ack for 90 s after %d of %d records", n, len(records))
				return
			}
		}
		done <- firstErr
	}()
	for i, s := range records {
		m := &sarama.ProducerMessage{Topic: topic, Partition: s.partition, Key: bytesEncoder(s.key),
			Value: bytesEncoder(s.value), Timestamp: time.UnixMilli(s.timestamp), Metadata: i}
		for _, h := range s.headers {
			m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(h.key), Value: h.value})
		}
		p.Input() <- m
	}
	err = <-done
	if cerr := p.Close(); cerr != nil && err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("produce: %v", err)
	}
	return offsets
}

// saramaConsume reads each partition from the oldest offset until it holds want[p] records.
func saramaConsume(t *testing.T, topic string, want map[int32]int) map[int32][]got {
	t.Helper()
	c, err := sarama.NewConsumer([]string{bootstrap(t)}, saramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	out := map[int32][]got{}
	deadline := time.After(60 * time.Second)
	for p, n := range want {
		pc, err := c.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatalf("ConsumePartition %d: %v", p, err)
		}
		for len(out[p]) < n {
			select {
			case m := <-pc.Messages():
				g := got{offset: m.Offset, key: m.Key, value: m.Value, timestamp: m.Timestamp.UnixMilli(), createTs: true}
				for _, h := range m.Headers {
					g.headers = append(g.headers, header{string(h.Key), h.Value})
				}
				out[p] = append(out[p], g)
			case e := <-pc.Errors():
				t.Fatalf("consume partition %d: %v", p, e)
			case <-deadline:
				t.Fatalf("consume timed out: have %v of %v", counts(out), want)
			}
		}
		_ = pc.Close()
	}
	return out
}

func TestSaramaProduceConsume(t *testing.T) {
	for _, codec := range codecs {
		for _, mode := range modes {
			t.Run(codec+"/"+mode, func(t *testing.T) {
				adm := saramaAdmin(t)
				topic := topicName("sarama", codec+"-"+mode)
				saramaCreate(t, adm, topic, partitions, nil)
				records := makeRecords(recordCount(), baseTimestamp())
				acked := saramaProduce(t, topic, codec, mode, records)
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
				gots := saramaConsume(t, topic, want)
				for p, idx := range pos {
					compare(t, records, idx, p, gots[p])
				}
			})
		}
	}
}

func TestSaramaAdmin(t *testing.T) {
	adm := saramaAdmin(t)
	topic := topicName("sarama", "admin")
	v := "2000000"
	saramaCreate(t, adm, topic, partitions, map[string]*string{"max.message.bytes": &v})
	err := adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1}, false)
	if !errors.Is(err, sarama.ErrTopicAlreadyExists) {
		t.Errorf("second CreateTopic: %v, want TOPIC_ALREADY_EXISTS", err)
	}
	mds, err := adm.DescribeTopics([]string{topic})
	if err != nil || len(mds) != 1 {
		t.Fatalf("DescribeTopics: %v %v", mds, err)
	}
	if mds[0].Err != sarama.ErrNoError || len(mds[0].Partitions) != partitions {
		t.Errorf("DescribeTopics: err %v, %d partitions", mds[0].Err, len(mds[0].Partitions))
	}
	entries, err := adm.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic})
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) < 20 {
		t.Errorf("DescribeConfig: %d entries, want >= 20", len(entries))
	}
	byName := map[string]sarama.ConfigEntry{}
	for _, e := range entries {
		byName[e.Name] = e
	}
	check := func(name, value string, source sarama.ConfigSource) {
		e, ok := byName[name]
		if !ok {
			t.Errorf("DescribeConfig: %s missing", name)
			return
		}
		if e.Value != value || e.Source != source {
			t.Errorf("DescribeConfig %s = %q (source %v), want %q (source %v)", name, e.Value, e.Source, value, source)
		}
	}
	check("max.message.bytes", "2000000", sarama.SourceTopic)
	check("cleanup.policy", "delete", sarama.SourceDefault)
	check("retention.ms", "604800000", sarama.SourceDefault)
	if err := adm.DeleteTopic(topic); err != nil {
		t.Errorf("DeleteTopic: %v", err)
	}
}

func TestSaramaListOffsetsByTimestamp(t *testing.T) {
	adm := saramaAdmin(t)
	topic := topicName("sarama", "list-offsets")
	saramaCreate(t, adm, topic, 1, nil)
	const n = 200
	base := baseTimestamp()
	records := make([]sent, n)
	for i := range records {
		records[i] = sent{key: []byte(fmt.Sprintf("k%d", i)), value: []byte(fmt.Sprintf("v%d", i)), timestamp: base + 10*int64(i)}
	}
	saramaProduce(t, topic, "none", "acksall-idempotent", records)
	client, err := sarama.NewClient([]string{bootstrap(t)}, saramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	cases := []struct{ ts, offset int64 }{
		{base - 1000, 0}, {base, 0}, {base + 1, 1}, {base + 570, 57}, {base + 575, 58},
		{base + 10*(n-1), n - 1}, {base + 10*n, -1},
		{sarama.OffsetOldest, 0}, {sarama.OffsetNewest, n},
	}
	var failures []string
	for _, c := range cases {
		o, err := client.GetOffset(topic, 0, c.ts)
		if err != nil || o != c.offset {
			failures = append(failures, fmt.Sprintf("GetOffset(%d) = %d (%v), want %d", c.ts, o, err, c.offset))
		}
	}
	if len(failures) > 0 {
		t.Error(strings.Join(failures, "\n"))
	}
}
