//! What each per-record AI feature (issues 20 and 21) costs at produce, in CPU instructions
//! per record: the broker's own produce-path code for one batch — the priority gate's
//! admission and latency sample (every Produce request pays them, in its topic's lane),
//! `validate_produce_records` (CRC, the record walk, the topic's record checks), then the
//! home shard's redaction hook, the dedup window's check and remember and the expiry map's
//! note — run on the same batches with each feature on, and with none (`plain`,
//! `plain_json`). The batches are what `benches/quick/ai_cost.py` sends: keyless records with
//! a `msg-id` header (a new id each) and a `ttl-ms` header, 384-float unit vectors as raw
//! f32le or as JSON documents `{"text": "call +1 415 555 01NN or mail userN@…",
//! "embedding": [...]}`.
//!
//! Wall-clock figures on a shared machine are noise; instruction counts are not. Run the
//! measured part under callgrind, one mode at a time:
//!
//! ```text
//! cargo bench -p strom --bench ai_cost --no-run -j2
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null --toggle-collect='*ai_cost::measured*' \
//!     target/release/deps/ai_cost-<hash> dedup
//! ```
//!
//! `benches/quick/ai_cost_callgrind.sh` does both for every mode and prints instructions per
//! record. Without valgrind the binary prints ns per record (indicative only).
//!
//! Args: `MODE [BATCHES [RECORDS_PER_BATCH]]`, MODE one of plain, dedup, ttl, priority,
//! embed_f32, plain_json, embed_json, redact (default: all, wall clock).

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use bytes::Bytes;
use strom::config::dynamic::BrokerView;
use strom::config::effective::TopicSettings;
use strom::partition::dedup::DedupWindow;
use strom::partition::expiry::ExpiryCache;
use strom::partition::redact::redact_batch;
use strom::partition::validate_produce_records;
use strom::shard::priority::{GateConfig, PriorityGate};
use strom::test_support::TestBatch;

const DIM: usize = 384;
/// The dedup window's size in the issue's figure (and ai_cost.py's `strom.dedup.max.ids`).
const WINDOW_IDS: usize = 1_000_000;

const MODES: &[&str] = &[
    "plain",
    "dedup",
    "ttl",
    "priority",
    "embed_f32",
    "plain_json",
    "embed_json",
    "redact",
];

fn configs(mode: &str) -> BTreeMap<String, String> {
    let pairs: &[(&str, &str)] = match mode {
        "dedup" => &[
            ("strom.dedup.header", "msg-id"),
            ("strom.dedup.max.ids", "1000000"),
        ],
        "ttl" => &[("strom.ttl.header", "ttl-ms")],
        "priority" => &[("strom.priority", "critical")],
        "embed_f32" => &[
            ("strom.embedding.format", "f32le"),
            ("strom.embedding.dimension", "384"),
            ("strom.embedding.normalized", "true"),
        ],
        "embed_json" => &[
            ("strom.embedding.format", "json"),
            ("strom.embedding.field", "/embedding"),
            ("strom.embedding.dimension", "384"),
            ("strom.embedding.normalized", "true"),
        ],
        "redact" => &[("strom.redact.rules", "email,phone")],
        _ => &[],
    };
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// ai_cost.py's `values`: unit vectors, raw or in a JSON document with PII in its text.
fn value(i: usize, json: bool) -> Bytes {
    let v: Vec<f64> = (0..DIM)
        .map(|j| ((i * 31 + j * 7) % 97) as f64 / 97.0 + 0.01)
        .collect();
    let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
    let v: Vec<f64> = v.iter().map(|x| x / norm).collect();
    if !json {
        return v.iter().flat_map(|x| (*x as f32).to_le_bytes()).collect();
    }
    let numbers: Vec<String> = v
        .iter()
        .map(|x| format!("{}", (x * 1e6).round() / 1e6))
        .collect();
    format!(
        r#"{{"text": "call +1 415 555 01{:02} or mail user{i}@example.com", "embedding": [{}]}}"#,
        i % 100,
        numbers.join(", ")
    )
    .into()
}

/// `batches` batches of `per_batch` records, each with a new `msg-id` and a 10-minute
/// `ttl-ms` (in every mode, so that only the feature differs between modes).
fn batches(json: bool, batches: usize, per_batch: usize) -> Vec<Bytes> {
    let now = strom::now_ms();
    (0..batches)
        .map(|b| {
            TestBatch::new(per_batch)
                .keyless()
                .at(now)
                .encode_with(|rs| {
                    for (i, r) in rs.iter_mut().enumerate() {
                        let n = b * per_batch + i;
                        r.value = Some(value(n % 64, json));
                        r.headers.insert(
                            kafka_protocol::protocol::StrBytes::from_static_str("msg-id"),
                            Some(Bytes::from(format!("4242-{n}"))),
                        );
                        r.headers.insert(
                            kafka_protocol::protocol::StrBytes::from_static_str("ttl-ms"),
                            Some(Bytes::from_static(b"600000")),
                        );
                    }
                })
        })
        .collect()
}

/// What a partition keeps between batches.
struct State {
    gate: PriorityGate,
    window: DedupWindow,
    expiry: ExpiryCache,
}

/// The produce-path work for one batch in its own request, as the broker runs it: the
/// priority gate's admission and validation on the receiving shard, then on the home shard
/// redaction, the dedup window and the expiry note (what `Partition::append` does before the
/// log append, which is the same for every mode), and the gate's latency sample.
fn one_batch(
    settings: &TopicSettings,
    state: &mut State,
    batch: &Bytes,
    next_offset: i64,
    now_ms: i64,
) -> i64 {
    let lane = settings.flow.priority;
    let admitted = state.gate.admit(lane, 0.0, Instant::now());
    let window = &mut state.window;
    let (header, records) =
        validate_produce_records("cost", batch, settings, None, now_ms).expect("valid batch");
    let (header, records) = match &settings.redact {
        Some(Ok(plan)) => {
            let mut hits = plan.new_hits();
            redact_batch(
                plan,
                &header,
                &records,
                settings.max_decompressed_bytes,
                &mut hits,
            )
            .expect("redacts")
            .unwrap_or((header, records))
        }
        _ => (header, records),
    };
    if let Some(ds) = &settings.flow.dedup {
        window.expire(now_ms, ds.window_ms);
        let (_, ids) = window
            .check(
                &records,
                &header,
                ds,
                next_offset,
                now_ms,
                settings.max_decompressed_bytes,
            )
            .expect("dedup check");
        window.remember(ids, next_offset, now_ms, ds);
    }
    state.expiry.note_append(
        &settings.flow,
        &header,
        &records,
        next_offset,
        settings.max_decompressed_bytes,
    );
    state.gate.record_produce(
        lane,
        Duration::from_micros(500),
        batch.len(),
        admitted.quiet,
    );
    black_box(&records);
    header.records_count as i64
}

/// The part callgrind counts (`--toggle-collect`): every batch once.
#[inline(never)]
fn measured(settings: &TopicSettings, state: &mut State, input: &[Bytes]) -> i64 {
    let now_ms = strom::now_ms();
    let mut offset = 10_000_000;
    for b in input {
        offset += one_batch(settings, state, b, offset, now_ms);
    }
    offset
}

fn run(mode: &str, n_batches: usize, per_batch: usize) {
    let json = mode.contains("json") || mode == "redact";
    let settings = TopicSettings::resolve(
        &configs(mode),
        &BrokerView::from_static(Default::default(), BTreeMap::new()),
    );
    let mut state = State {
        gate: PriorityGate::new(
            GateConfig {
                alpha: 0.8,
                static_threshold_ms: None,
                max_throttle_ms: 500.0,
            },
            &prometheus::Registry::new(),
        ),
        window: DedupWindow::new("msg-id"),
        expiry: ExpiryCache::default(),
    };
    let window = &mut state.window;
    if let Some(ds) = &settings.flow.dedup {
        // A full window: every insert measured evicts one id, as in ai_cost.py's steady
        // state.
        let now = strom::now_ms();
        for i in 0..WINDOW_IDS {
            window.insert(format!("9999-{i}").as_bytes(), i as i64, now, ds.max_ids);
        }
    }
    let input = batches(json, n_batches, per_batch);
    // One warm-up batch outside the input (lazy statics, the first allocations).
    let warm = batches(json, 1, per_batch);
    let _ = measured(&settings, &mut state, &warm);
    let started = Instant::now();
    black_box(measured(&settings, &mut state, &input));
    let ns = started.elapsed().as_nanos() as f64 / (n_batches * per_batch) as f64;
    let bytes: usize = input.iter().map(Bytes::len).sum();
    println!(
        "{mode:11} {} records, {:.0} bytes/record: {ns:.0} ns/record (wall clock)",
        n_batches * per_batch,
        bytes as f64 / (n_batches * per_batch) as f64
    );
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let n_batches = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(20);
    let per_batch = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(100);
    match args.first().map(String::as_str) {
        Some(m) if MODES.contains(&m) => run(m, n_batches, per_batch),
        Some(other) => {
            eprintln!("unknown mode {other:?}; one of {}", MODES.join(", "));
            std::process::exit(2);
        }
        None => MODES.iter().for_each(|m| run(m, n_batches, per_batch)),
    }
}
