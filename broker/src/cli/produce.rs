//! `strom produce TOPIC`: records from stdin through librdkafka (batching, compression,
//! idempotence, Java's murmur2 partitioner), one delivery report per record.
//!
//! A reader thread parses stdin (blocking reads) and hands records to the async loop, which
//! keeps up to `MAX_IN_FLIGHT` deliveries outstanding and reports them in input order.

use std::io::IsTerminal;
use std::time::Duration;

use futures::stream::{FuturesOrdered, StreamExt};
use rdkafka::config::ClientConfig;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::util::Timeout;
use serde::Serialize;

use super::error::{kafka_error_name, CliError};
use super::fail_fast::FailFast;
use super::template::{Rec, Template};
use super::{split_kv, ConnArgs};

const MAX_IN_FLIGHT: usize = 10_000;

type Outcome = Result<
    rdkafka::producer::future_producer::OwnedDeliveryResult,
    futures::channel::oneshot::Canceled,
>;
/// A record's delivery: its topic and librdkafka's answer.
type Pending = std::pin::Pin<Box<dyn std::future::Future<Output = (String, Outcome)> + Send>>;

#[derive(clap::Args)]
pub struct ProduceArgs {
    pub topic: String,
    /// Key for every record (a `%k` in --format takes it per record instead).
    #[arg(short, long)]
    pub key: Option<String>,
    /// Header KEY=VALUE on every record, repeatable.
    #[arg(short = 'H', long = "header", value_name = "KEY=VALUE")]
    pub headers: Vec<String>,
    /// How stdin is read: a template (`%k:%v\n`, fields in docs/cli.md) or `json` (one object
    /// per line, as `strom consume --format json` prints them).
    #[arg(short, long, default_value = "%v\\n")]
    pub format: String,
    /// Partition for every record (default: by key, Java's murmur2, as Kafka's clients).
    #[arg(short, long)]
    pub partition: Option<i32>,
    /// all, 1 or 0.
    #[arg(long, default_value = "all")]
    pub acks: String,
    /// none, gzip, snappy, lz4 or zstd.
    #[arg(short = 'z', long, default_value = "none")]
    pub compression: String,
    /// What to print per delivered record: text, json or none.
    #[arg(short, long, default_value = "text")]
    pub output: String,
    /// librdkafka property KEY=VALUE, repeatable (e.g. -X linger.ms=50).
    #[arg(short = 'X', value_name = "KEY=VALUE")]
    pub properties: Vec<String>,
}

#[derive(Debug, Serialize)]
struct Delivered<'a> {
    topic: &'a str,
    partition: i32,
    offset: i64,
    timestamp: Option<i64>,
}

enum Input {
    Template(Template),
    Json,
}

fn json_record(line: &str, topic: &str) -> Result<Rec, CliError> {
    let bad = |why: String| CliError::Usage(format!("json input line {line:?}: {why}"));
    let v: serde_json::Value = serde_json::from_str(line).map_err(|e| bad(e.to_string()))?;
    let obj = v.as_object().ok_or_else(|| bad("not an object".into()))?;
    let text = |k: &str| {
        obj.get(k)
            .and_then(|v| v.as_str())
            .map(|s| s.as_bytes().to_vec())
    };
    let mut headers = Vec::new();
    match obj.get("headers") {
        Some(serde_json::Value::Array(hs)) => {
            for h in hs {
                let k = h
                    .get("key")
                    .and_then(|k| k.as_str())
                    .ok_or_else(|| bad("header without key".into()))?;
                headers.push((
                    k.to_string(),
                    h.get("value")
                        .and_then(|v| v.as_str())
                        .map(|s| s.as_bytes().to_vec()),
                ));
            }
        }
        Some(serde_json::Value::Object(hs)) => {
            for (k, v) in hs {
                headers.push((k.clone(), v.as_str().map(|s| s.as_bytes().to_vec())));
            }
        }
        Some(serde_json::Value::Null) | None => {}
        Some(_) => return Err(bad("headers must be a list or an object".into())),
    }
    Ok(Rec {
        // The TOPIC argument is where records go, so `consume -f json` output copies a
        // topic into another.
        topic: topic.to_string(),
        partition: obj
            .get("partition")
            .and_then(|p| p.as_i64())
            .map(|p| p as i32),
        offset: None,
        key: text("key"),
        value: text("value"),
        timestamp: obj.get("timestamp").and_then(|t| t.as_i64()),
        headers,
    })
}

/// Reads stdin into records on a thread of its own (stdin blocks).
fn spawn_reader(input: Input, topic: String) -> tokio::sync::mpsc::Receiver<Result<Rec, CliError>> {
    let (tx, rx) = tokio::sync::mpsc::channel(1024);
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        let mut lock = stdin.lock();
        loop {
            let next = match &input {
                Input::Template(t) => t.read(&mut lock, &topic),
                Input::Json => {
                    let mut line = String::new();
                    match std::io::BufRead::read_line(&mut lock, &mut line) {
                        Ok(0) => Ok(None),
                        Ok(_) if line.trim().is_empty() => continue,
                        Ok(_) => json_record(line.trim_end(), &topic).map(Some),
                        Err(e) => Err(e.into()),
                    }
                }
            };
            let stop = !matches!(next, Ok(Some(_)));
            let item = match next {
                Ok(Some(r)) => Ok(r),
                Ok(None) => break,
                Err(e) => Err(e),
            };
            if tx.blocking_send(item).is_err() || stop {
                break;
            }
        }
    });
    rx
}

pub fn producer_config(conn: &ConnArgs, properties: &[String]) -> Result<ClientConfig, CliError> {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &conn.brokers)
        .set("client.id", "strom-cli")
        .set("socket.timeout.ms", conn.timeout_ms().max(10).to_string());
    conn.security.librdkafka_config(&mut c)?;
    for p in properties {
        let (k, v) = split_kv(p)?;
        c.set(k, v);
    }
    Ok(c)
}

pub async fn run(conn: &ConnArgs, args: ProduceArgs) -> Result<(), CliError> {
    let acks = match args.acks.as_str() {
        "all" | "-1" => "all",
        "1" => "1",
        "0" => "0",
        other => {
            return Err(CliError::Usage(format!(
                "--acks {other:?}: expected all, 1 or 0"
            )))
        }
    };
    if !["none", "gzip", "snappy", "lz4", "zstd"].contains(&args.compression.as_str()) {
        return Err(CliError::Usage(format!(
            "--compression {:?}: expected none, gzip, snappy, lz4 or zstd",
            args.compression
        )));
    }
    let output = match args.output.as_str() {
        "text" | "json" | "none" => args.output.clone(),
        other => {
            return Err(CliError::Usage(format!(
                "--output {other:?}: expected text, json or none"
            )))
        }
    };
    let input = if args.format == "json" {
        Input::Json
    } else {
        Input::Template(Template::parse(&args.format)?)
    };
    let fixed_headers: Vec<(String, String)> = args
        .headers
        .iter()
        .map(|h| split_kv(h))
        .collect::<Result<_, _>>()?;

    let mut config = producer_config(conn, &[])?;
    config
        .set("acks", acks)
        .set("compression.type", &args.compression)
        // Kafka's Java clients partition keys by murmur2; so do we, so keys land where
        // they would from any Java producer.
        .set("partitioner", "murmur2_random")
        .set(
            "enable.idempotence",
            if acks == "all" { "true" } else { "false" },
        )
        .set(
            "message.timeout.ms",
            conn.timeout_ms().max(1000).to_string(),
        );
    for p in &args.properties {
        let (k, v) = split_kv(p)?;
        config.set(k, v);
    }
    let fail_fast = FailFast::new(&conn.brokers);
    let mut unrecoverable = fail_fast.watch();
    let producer: FutureProducer<FailFast> = config
        .create_with_context(fail_fast.clone())
        .map_err(|e| CliError::Client(format!("creating the producer: {e}")))?;

    let progress = progress_bar();
    let mut records = spawn_reader(input, args.topic.clone());
    let mut pending: FuturesOrdered<Pending> = FuturesOrdered::new();
    let (mut ok, mut failed) = (0u64, 0u64);
    let mut input_error = None;
    let mut input_done = false;
    let report = |topic: &str, r: Outcome, ok: &mut u64, failed: &mut u64| match r {
        Ok(Ok(d)) => {
            *ok += 1;
            let ts = d.timestamp.to_millis();
            match output.as_str() {
                "text" => println!(
                    "Produced to partition {} at offset {} with timestamp {}.",
                    d.partition,
                    d.offset,
                    ts.unwrap_or(-1)
                ),
                "json" => println!(
                    "{}",
                    serde_json::to_string(&Delivered {
                        topic,
                        partition: d.partition,
                        offset: d.offset,
                        timestamp: ts
                    })
                    .unwrap_or_default()
                ),
                _ => {}
            }
        }
        Ok(Err((e, _))) => {
            *failed += 1;
            eprintln!(
                "strom: record not delivered to {topic}: {}",
                describe_kafka_error(&e)
            );
        }
        Err(_) => {
            *failed += 1;
            eprintln!("strom: record not delivered to {topic}: the producer went away");
        }
    };
    loop {
        tokio::select! {
            biased;
            // Guarded like the others, or `else` (all done) would never be reached.
            Ok(()) = unrecoverable.changed(), if !input_done || !pending.is_empty() => {
                if let Some(e) = fail_fast.take() {
                    return Err(e);
                }
            }
            Some((topic, done)) = pending.next(), if !pending.is_empty() => {
                report(&topic, done, &mut ok, &mut failed);
                if let Some(p) = &progress { p.inc(1); }
            }
            next = records.recv(), if !input_done && pending.len() < MAX_IN_FLIGHT => {
                let rec = match next {
                    None => { input_done = true; continue; }
                    Some(Err(e)) => { input_error = Some(e); input_done = true; continue; }
                    Some(Ok(r)) => r,
                };
                let mut headers = OwnedHeaders::new();
                for (k, v) in &fixed_headers {
                    headers = headers.insert(Header { key: k, value: Some(v.as_bytes()) });
                }
                for (k, v) in &rec.headers {
                    headers = headers.insert(Header { key: k, value: v.as_deref() });
                }
                let key = rec.key.clone().or_else(|| args.key.as_ref().map(|k| k.as_bytes().to_vec()));
                let topic = rec.topic.clone();
                let mut record: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(&topic).headers(headers);
                if let Some(k) = &key { record = record.key(k.as_slice()); }
                if let Some(v) = &rec.value { record = record.payload(v.as_slice()); }
                if let Some(p) = rec.partition.or(args.partition) { record = record.partition(p); }
                if let Some(ts) = rec.timestamp { record = record.timestamp(ts); }
                let fut = loop {
                    match producer.send_result(record) {
                        Ok(f) => break f,
                        Err((rdkafka::error::KafkaError::MessageProduction(rdkafka::types::RDKafkaErrorCode::QueueFull), r)) => {
                            record = r;
                            // librdkafka's queue is full: let deliveries drain, then retry.
                            if let Some((t, done)) = pending.next().await {
                                report(&t, done, &mut ok, &mut failed);
                                if let Some(p) = &progress { p.inc(1); }
                            } else {
                                tokio::time::sleep(Duration::from_millis(10)).await;
                            }
                        }
                        Err((e, _)) => return Err(CliError::Client(format!("producing to {topic}: {}", describe_kafka_error(&e)))),
                    }
                };
                pending.push_back(Box::pin(async move { (topic, fut.await) }));
            }
            else => break,
        }
    }
    producer
        .flush(Timeout::After(conn.timeout()))
        .map_err(|e| CliError::Client(format!("flushing: {e}")))?;
    if let Some(p) = progress {
        p.finish_and_clear();
    }
    if let Some(e) = input_error {
        eprintln!(
            "strom: stopped reading input after {} record(s)",
            ok + failed
        );
        return Err(e);
    }
    if failed > 0 {
        return Err(CliError::Partial {
            failed: failed as usize,
            total: (ok + failed) as usize,
        });
    }
    Ok(())
}

/// librdkafka's error with Kafka's name for the broker's code when it is one.
pub fn describe_kafka_error(e: &rdkafka::error::KafkaError) -> String {
    match e.rdkafka_error_code() {
        Some(code) if (code as i32) > 0 => format!("{} ({e})", kafka_error_name(code as i16)),
        _ => e.to_string(),
    }
}

/// A spinner with a rate on stderr while records stream from a pipe into a terminal session.
fn progress_bar() -> Option<indicatif::ProgressBar> {
    if !std::io::stderr().is_terminal() || std::io::stdin().is_terminal() {
        return None;
    }
    let p = indicatif::ProgressBar::new_spinner();
    p.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {pos} records delivered ({per_sec})")
            .ok()?,
    );
    p.enable_steady_tick(Duration::from_millis(200));
    Some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_json_lines_when_read_then_records_like_consume_prints_them() {
        let r = json_record(r#"{"key":"k","value":"v","partition":1,"timestamp":5,"headers":[{"key":"h","value":"x"},{"key":"n","value":null}]}"#, "t").unwrap();
        assert_eq!(r.key.as_deref(), Some(&b"k"[..]));
        assert_eq!(
            (r.partition, r.timestamp, r.topic.as_str()),
            (Some(1), Some(5), "t")
        );
        assert_eq!(
            r.headers,
            vec![("h".into(), Some(b"x".to_vec())), ("n".into(), None)]
        );
        let r = json_record(r#"{"value":null,"headers":{"a":"1"}}"#, "t").unwrap();
        assert_eq!((r.key, r.value), (None, None));
        assert_eq!(r.headers.len(), 1);
    }

    #[test]
    fn given_bad_json_lines_when_read_then_usage_errors() {
        for line in [
            "not json",
            "[1]",
            r#"{"headers":5}"#,
            r#"{"headers":[{"value":"x"}]}"#,
        ] {
            assert!(
                matches!(json_record(line, "t"), Err(CliError::Usage(_))),
                "{line}"
            );
        }
    }
}
