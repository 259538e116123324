//! The workloads, all through librdkafka (the rdkafka crate) so every broker sees the same
//! client. Each one is bounded in time: producers stop sending at their deadline, flushes and
//! consumers have their own deadlines, and a workload that cannot finish reports what it did.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_executor::block_on;
use hdrhistogram::Histogram;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{ClientContext, Offset, TopicPartitionList};

const ADMIN_TIMEOUT: Duration = Duration::from_secs(30);

pub struct Target {
    pub bootstrap: String,
    /// Prefix of topic names, unique per run so reruns against one broker do not mix.
    pub run_id: String,
    /// Replicas of every topic the run creates (1 on a single node).
    pub replication_factor: i32,
    /// The topics' `min.insync.replicas`; `None` leaves the broker's default.
    pub min_insync_replicas: Option<u32>,
    /// librdkafka properties every client of the run gets besides the workload's own
    /// (`--client-config`: e.g. `security.protocol=ssl` and `ssl.ca.location` for a TLS
    /// listener), so the same workloads measure another listener of the same broker. Where
    /// both name a key the workload's setting wins: these change the transport, never the
    /// workload.
    pub client_config: Vec<(String, String)>,
}

impl Target {
    /// A client config for this target: the bootstrap servers and `client_config`.
    fn config(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &self.bootstrap);
        for (k, v) in &self.client_config {
            c.set(k, v);
        }
        c
    }

    pub fn topic(&self, what: &str) -> String {
        format!("bench-{}-{what}", self.run_id)
    }

    /// Deletes a measured workload's topic: a full run writes tens of GB at disk speed, and
    /// keeping every workload's data until the broker stops fills a small disk. A failure
    /// only costs disk space, so it is reported and the run goes on.
    pub fn delete_topic(&self, topic: &str) {
        let r = (|| -> anyhow::Result<()> {
            let (admin, opts) = self.admin()?;
            for r in block_on(admin.delete_topics(&[topic], &opts))? {
                if let Err((t, code)) = r {
                    anyhow::bail!("DeleteTopics {t}: {code:?}");
                }
            }
            Ok(())
        })();
        if let Err(e) = r {
            eprintln!("  (could not delete {topic}: {e:#})");
        }
    }

    fn admin(&self) -> anyhow::Result<(AdminClient<DefaultClientContext>, AdminOptions)> {
        let admin = self.config().create()?;
        let opts = AdminOptions::new()
            .operation_timeout(Some(ADMIN_TIMEOUT))
            .request_timeout(Some(ADMIN_TIMEOUT));
        Ok((admin, opts))
    }

    /// Waits until the cluster's Metadata lists `brokers` brokers (a cluster serves Metadata
    /// before every node has registered, and a replicated CreateTopics needs them all).
    pub fn wait_for_brokers(&self, brokers: usize, time: Duration) -> anyhow::Result<()> {
        let c = self.consumer()?;
        let deadline = Instant::now() + time;
        loop {
            let seen = match c.fetch_metadata(None, Duration::from_secs(5)) {
                Ok(md) => md.brokers().len(),
                Err(_) => 0,
            };
            if seen >= brokers {
                return Ok(());
            }
            if Instant::now() > deadline {
                anyhow::bail!("{seen} of {brokers} brokers in Metadata after {time:?}");
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    pub fn create_topic(&self, topic: &str, partitions: i32) -> anyhow::Result<()> {
        let (admin, opts) = self.admin()?;
        let min_isr = self.min_insync_replicas.map(|m| m.to_string());
        let mut nt = NewTopic::new(
            topic,
            partitions,
            TopicReplication::Fixed(self.replication_factor),
        );
        if let Some(m) = &min_isr {
            nt = nt.set("min.insync.replicas", m);
        }
        for r in block_on(admin.create_topics(&[nt], &opts))? {
            if let Err((t, code)) = r {
                if code != RDKafkaErrorCode::TopicAlreadyExists {
                    anyhow::bail!("CreateTopics {t}: {code:?}");
                }
            }
        }
        // Kafka answers CreateTopics before its partitions serve: wait until each answers.
        let c = self.consumer()?;
        let deadline = Instant::now() + ADMIN_TIMEOUT;
        for p in 0..partitions {
            while let Err(e) = c.fetch_watermarks(topic, p, Duration::from_secs(5)) {
                if Instant::now() > deadline {
                    anyhow::bail!("partition {p} of {topic} not ready: {e}");
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Ok(())
    }

    fn consumer(&self) -> anyhow::Result<BaseConsumer> {
        Ok(self
            .config()
            .set("group.id", format!("bench-{}", self.run_id))
            .set("enable.auto.commit", "false")
            .set("fetch.max.bytes", "52428800")
            .set("max.partition.fetch.bytes", "10485760")
            .set("queued.max.messages.kbytes", "262144")
            .create()?)
    }
}

/// Counts delivery reports; the producers never block on them.
#[derive(Default)]
pub struct Delivered {
    ok: AtomicU64,
    failed: AtomicU64,
    /// For latency runs: nothing. Kept small so the callback stays cheap.
    last_error: std::sync::Mutex<Option<KafkaError>>,
}

impl ClientContext for Delivered {}

impl ProducerContext for Delivered {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        match result {
            Ok(_) => self.ok.fetch_add(1, Ordering::Relaxed),
            Err((e, _)) => {
                *self.last_error.lock().expect("not poisoned") = Some(e.clone());
                self.failed.fetch_add(1, Ordering::Relaxed)
            }
        };
    }
}

fn producer(
    target: &Target,
    acks: &str,
    linger_ms: u32,
) -> anyhow::Result<BaseProducer<Delivered>> {
    Ok(target
        .config()
        .set("acks", acks)
        // Idempotence with acks=all, as modern clients default to.
        .set(
            "enable.idempotence",
            if acks == "all" { "true" } else { "false" },
        )
        .set("linger.ms", linger_ms.to_string())
        .set("batch.size", "1048576")
        .set("queue.buffering.max.messages", "1000000")
        .set("queue.buffering.max.kbytes", "1048576")
        .set("message.timeout.ms", "60000")
        .create_with_context(Delivered::default())?)
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Throughput {
    pub messages: u64,
    pub bytes: u64,
    pub failed: u64,
    pub seconds: f64,
}

impl Throughput {
    pub fn msgs_per_s(&self) -> f64 {
        self.messages as f64 / self.seconds.max(1e-9)
    }
    pub fn mb_per_s(&self) -> f64 {
        self.bytes as f64 / self.seconds.max(1e-9) / 1e6
    }
}

/// `producers` threads, each sending `size`-byte values round-robin over `partitions` as fast
/// as librdkafka takes them, for `time`; then every ack is awaited (bounded).
pub fn produce(
    target: &Target,
    topic: &str,
    partitions: i32,
    producers: usize,
    size: usize,
    acks: &str,
    time: Duration,
) -> anyhow::Result<Throughput> {
    let start = Instant::now();
    let deadline = start + time;
    let mut handles = Vec::new();
    for w in 0..producers {
        let p = producer(target, acks, 5)?;
        let topic = topic.to_string();
        handles.push(std::thread::spawn(
            move || -> (u64, u64, Option<KafkaError>) {
                let payload = vec![b'x'; size];
                let mut i = w as u64;
                while Instant::now() < deadline {
                    // Send a burst between clock reads; librdkafka batches them anyway.
                    for _ in 0..64 {
                        let partition = (i % partitions as u64) as i32;
                        let rec: BaseRecord<'_, (), [u8]> = BaseRecord::to(&topic)
                            .partition(partition)
                            .payload(&payload);
                        match p.send(rec) {
                            Ok(()) => i += producers as u64,
                            Err((
                                KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull),
                                _,
                            )) => {
                                p.poll(Duration::from_millis(1));
                            }
                            Err((e, _)) => {
                                let failed = p.context().failed.load(Ordering::Relaxed) + 1;
                                return (p.context().ok.load(Ordering::Relaxed), failed, Some(e));
                            }
                        }
                    }
                    p.poll(Duration::ZERO);
                }
                let _ = p.flush(Duration::from_secs(60));
                let ctx = p.context();
                let err = ctx.last_error.lock().expect("not poisoned").clone();
                (
                    ctx.ok.load(Ordering::Relaxed),
                    ctx.failed.load(Ordering::Relaxed),
                    err,
                )
            },
        ));
    }
    let (mut ok, mut failed) = (0, 0);
    for h in handles {
        let (o, f, e) = h
            .join()
            .map_err(|_| anyhow::anyhow!("producer thread panicked"))?;
        ok += o;
        failed += f;
        if let Some(e) = e {
            eprintln!("    producer error: {e}");
        }
    }
    Ok(Throughput {
        messages: ok,
        bytes: ok * size as u64,
        failed,
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// Reads `topic` from the beginning (assign, no group) until `expect` records or `time`.
pub fn consume(
    target: &Target,
    topic: &str,
    partitions: i32,
    expect: u64,
    time: Duration,
) -> anyhow::Result<Throughput> {
    let c = target.consumer()?;
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Beginning)?;
    }
    c.assign(&tpl)?;
    let start = Instant::now();
    let (mut n, mut bytes) = (0u64, 0u64);
    while n < expect && start.elapsed() < time {
        if let Some(Ok(m)) = c.poll(Duration::from_millis(100)) {
            n += 1;
            bytes += m.payload_len() as u64;
        }
    }
    Ok(Throughput {
        messages: n,
        bytes,
        failed: expect.saturating_sub(n),
        seconds: start.elapsed().as_secs_f64(),
    })
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Latency {
    pub rate: u64,
    pub size: usize,
    pub sent: u64,
    pub received: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
}

/// End to end at a fixed rate: a producer (acks=all) sends on a schedule, a consumer in the
/// same process receives. Latency is measured from each record's *intended* send time (on
/// the schedule), not from when it was actually sent, so a stall that delays later sends
/// counts against all of them: the coordinated-omission correction.
pub fn end_to_end(
    target: &Target,
    topic: &str,
    rate: u64,
    size: usize,
    time: Duration,
) -> anyhow::Result<Latency> {
    anyhow::ensure!(size >= 8, "latency records carry an 8-byte timestamp");
    let c = target.consumer()?;
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning)?;
    c.assign(&tpl)?;
    let p = producer(target, "all", 1)?;
    // Warm up: connections, metadata and the consumer's first fetch are set up before the
    // schedule starts, so start-up is not charged to the first records as latency.
    let warm = Instant::now();
    let mut warmed = false;
    while !warmed && warm.elapsed() < Duration::from_secs(30) {
        let marker = u64::MAX.to_le_bytes();
        let rec: BaseRecord<'_, (), [u8]> = BaseRecord::to(topic).partition(0).payload(&marker);
        let _ = p.send(rec);
        let _ = p.flush(Duration::from_secs(5));
        let until = Instant::now() + Duration::from_secs(2);
        while !warmed && Instant::now() < until {
            warmed = matches!(c.poll(Duration::from_millis(50)), Some(Ok(_)));
        }
    }
    anyhow::ensure!(warmed, "warm-up record not consumed within 30 s");
    let base = Instant::now();
    let total = rate * time.as_secs().max(1);
    let topic_name = topic.to_string();
    let sender = std::thread::spawn(move || -> u64 {
        let mut payload = vec![0u8; size];
        // A deterministic, non-compressible-looking body (e.g. an embedding's floats).
        for (i, b) in payload.iter_mut().enumerate().skip(8) {
            *b = (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[0];
        }
        let interval = Duration::from_secs_f64(1.0 / rate as f64);
        let mut sent = 0;
        for i in 0..total {
            let intended = interval * i as u32;
            let now = base.elapsed();
            if intended > now {
                std::thread::sleep(intended - now);
            }
            payload[..8].copy_from_slice(&(intended.as_nanos() as u64).to_le_bytes());
            loop {
                let rec: BaseRecord<'_, (), [u8]> =
                    BaseRecord::to(&topic_name).partition(0).payload(&payload);
                match p.send(rec) {
                    Ok(()) => break,
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                        p.poll(Duration::from_millis(1));
                    }
                    Err(_) => return sent,
                }
            }
            sent += 1;
            p.poll(Duration::ZERO);
        }
        let _ = p.flush(Duration::from_secs(30));
        sent
    });
    let mut hist = Histogram::<u64>::new_with_bounds(1, 120_000_000, 3)?;
    let deadline = time + Duration::from_secs(15);
    let mut received = 0u64;
    while received < total && base.elapsed() < deadline {
        if let Some(Ok(m)) = c.poll(Duration::from_millis(50)) {
            let now = base.elapsed().as_nanos() as u64;
            if let Some(b) = m.payload().filter(|b| b.len() >= 8) {
                let intended = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
                if intended == u64::MAX {
                    continue; // a warm-up record
                }
                hist.saturating_record((now.saturating_sub(intended) / 1000).max(1));
                received += 1;
            }
        }
    }
    let sent = sender
        .join()
        .map_err(|_| anyhow::anyhow!("sender thread panicked"))?;
    Ok(Latency {
        rate,
        size,
        sent,
        received,
        p50_us: hist.value_at_quantile(0.5),
        p99_us: hist.value_at_quantile(0.99),
        p999_us: hist.value_at_quantile(0.999),
        max_us: hist.max(),
    })
}
