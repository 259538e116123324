package compat

// franz-go and Sarama over TLS with a client certificate (the broker's SSL listener
// requires one) and over SASL_SSL with SCRAM-SHA-512, against the listeners run-clients.sh
// starts on both brokers (certificates made per run): each produces and reads back; a
// wrong password is refused with SASL_AUTHENTICATION_FAILED.

import (
	"context"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	fscram "github.com/twmb/franz-go/pkg/sasl/scram"
	xscram "github.com/xdg-go/scram"
)

func env(t *testing.T, name string) string {
	v := os.Getenv(name)
	if v == "" {
		t.Fatalf("%s is not set (run through compat-tests/run-clients.sh)", name)
	}
	return v
}

func tlsConfig(t *testing.T, withCert bool) *tls.Config {
	pem, err := os.ReadFile(env(t, "STROM_COMPAT_CA"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("no CA certificate in STROM_COMPAT_CA")
	}
	c := &tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS12}
	if withCert {
		cert, err := tls.LoadX509KeyPair(env(t, "STROM_COMPAT_CLIENT_CERT"), env(t, "STROM_COMPAT_CLIENT_KEY"))
		if err != nil {
			t.Fatal(err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c
}

// secured is one way in: the listener and what the client presents.
type secured struct {
	name      string
	bootstrap string
	tls       *tls.Config
	user, pw  string // SCRAM-SHA-512 when user is set
}

func ways(t *testing.T) []secured {
	return []secured{
		{"ssl", env(t, "STROM_COMPAT_SSL_BOOTSTRAP"), tlsConfig(t, true), "", ""},
		{"sasl-ssl", env(t, "STROM_COMPAT_SASL_SSL_BOOTSTRAP"), tlsConfig(t, false),
			env(t, "STROM_COMPAT_SASL_USER"), env(t, "STROM_COMPAT_SASL_PASSWORD")},
	}
}

func franzClient(t *testing.T, w secured, extra ...kgo.Opt) *kgo.Client {
	opts := []kgo.Opt{kgo.SeedBrokers(w.bootstrap), kgo.DialTLSConfig(w.tls), kgo.RequestRetries(2)}
	if w.user != "" {
		opts = append(opts, kgo.SASL(fscram.Auth{User: w.user, Pass: w.pw}.AsSha512Mechanism()))
	}
	c, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func secRecords(n int) [][2]string {
	out := make([][2]string, n)
	for i := range out {
		out[i] = [2]string{fmt.Sprintf("k%d", i), fmt.Sprintf("v%d-%d", i, time.Now().UnixNano())}
	}
	return out
}

func TestFranzGoSecuredProduceConsume(t *testing.T) {
	for _, w := range ways(t) {
		t.Run(w.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			topic := topicName("franz", w.name)
			c := franzClient(t, w, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())
			defer c.Close()
			recs := secRecords(50)
			for _, r := range recs {
				if err := c.ProduceSync(ctx, &kgo.Record{Key: []byte(r[0]), Value: []byte(r[1]), Partition: 0}).FirstErr(); err != nil {
					t.Fatalf("produce: %v", err)
				}
			}
			cons := franzClient(t, w, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
			defer cons.Close()
			var got [][2]string
			for len(got) < len(recs) {
				fs := cons.PollFetches(ctx)
				if err := ctx.Err(); err != nil {
					t.Fatalf("consumed %d of %d: %v", len(got), len(recs), err)
				}
				fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
				fs.EachRecord(func(r *kgo.Record) { got = append(got, [2]string{string(r.Key), string(r.Value)}) })
			}
			if fmt.Sprint(got) != fmt.Sprint(recs) {
				t.Fatalf("read back differs:\n got %v\nwant %v", got, recs)
			}
		})
	}
}

func TestFranzGoWrongPasswordIsRefused(t *testing.T) {
	w := ways(t)[1]
	w.pw = "not-the-password"
	c := franzClient(t, w)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := c.Ping(ctx)
	if !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("want SASL_AUTHENTICATION_FAILED, got %v", err)
	}
}

// xdgSCRAM is Sarama's SCRAMClient on xdg-go/scram (the client Sarama's docs use).
type xdgSCRAM struct{ conv *xscram.ClientConversation }

func (x *xdgSCRAM) Begin(user, pass, authz string) error {
	c, err := xscram.HashGeneratorFcn(sha512.New).NewClient(user, pass, authz)
	if err != nil {
		return err
	}
	x.conv = c.NewConversation()
	return nil
}
func (x *xdgSCRAM) Step(challenge string) (string, error) { return x.conv.Step(challenge) }
func (x *xdgSCRAM) Done() bool                            { return x.conv.Done() }

func saramaSecured(w secured) *sarama.Config {
	cfg := saramaConfig()
	cfg.Net.TLS.Enable = true
	cfg.Net.TLS.Config = w.tls
	if w.user != "" {
		cfg.Net.SASL.Enable = true
		cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
		cfg.Net.SASL.User = w.user
		cfg.Net.SASL.Password = w.pw
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &xdgSCRAM{} }
	}
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	return cfg
}

func TestSaramaSecuredProduceConsume(t *testing.T) {
	for _, w := range ways(t) {
		t.Run(w.name, func(t *testing.T) {
			cfg := saramaSecured(w)
			topic := topicName("sarama", w.name)
			adm, err := sarama.NewClusterAdmin([]string{w.bootstrap}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer adm.Close()
			if err := adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
				t.Fatal(err)
			}
			p, err := sarama.NewSyncProducer([]string{w.bootstrap}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			recs := secRecords(50)
			for _, r := range recs {
				if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Partition: 0, Key: sarama.StringEncoder(r[0]), Value: sarama.StringEncoder(r[1])}); err != nil {
					t.Fatalf("produce: %v", err)
				}
			}
			p.Close()
			cons, err := sarama.NewConsumer([]string{w.bootstrap}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer cons.Close()
			pc, err := cons.ConsumePartition(topic, 0, sarama.OffsetOldest)
			if err != nil {
				t.Fatal(err)
			}
			defer pc.Close()
			var got [][2]string
			timeout := time.After(60 * time.Second)
			for len(got) < len(recs) {
				select {
				case m := <-pc.Messages():
					got = append(got, [2]string{string(m.Key), string(m.Value)})
				case err := <-pc.Errors():
					t.Fatalf("consume: %v", err)
				case <-timeout:
					t.Fatalf("consumed %d of %d", len(got), len(recs))
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(recs) {
				t.Fatalf("read back differs:\n got %v\nwant %v", got, recs)
			}
		})
	}
}

func TestSaramaWrongPasswordIsRefused(t *testing.T) {
	w := ways(t)[1]
	w.pw = "not-the-password"
	cfg := saramaSecured(w)
	cfg.Metadata.Retry.Max = 0
	_, err := sarama.NewClient([]string{w.bootstrap}, cfg)
	if err == nil || !strings.Contains(err.Error(), "SASL Authentication failed") && !errors.Is(err, sarama.ErrSASLAuthenticationFailed) {
		t.Fatalf("want SASL authentication failed, got %v", err)
	}
}
