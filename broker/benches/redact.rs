//! PII redaction on produce (`strom::partition::redact`): the cost of rewriting one batch of
//! 1 MiB of chat-like records with every built-in rule set, per codec, as throughput (MB/s;
//! its inverse is the cost per MB the issue asks for). Three cases: records with PII in every
//! one, records without any (the rules run, the batch is kept), and the same with JSON
//! pointers.
//!
//! `cargo bench -p strom --bench redact`.

use bytes::Bytes;
use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use kafka_protocol::records::Compression;
use storage::batch::BatchHeader;
use strom::partition::redact::redact_batch;
use strom::redact::Plan;
use strom::test_support::TestBatch;

const RULES: &str = "cn_id,email,phone,card,ip";

fn batch(codec: Compression, pii: bool, json: bool) -> Bytes {
    let text = if pii {
        "my id is 11010519491231002X, mail li.wei@example.com, call 13812345678, card 4111111111111111, from 10.2.3.4"
    } else {
        "please summarise the attached quarterly report and list the three largest cost items"
    };
    let value = if json {
        format!(r#"{{"role":"user","session":"s-1","messages":[{{"content":"{text}"}}]}}"#)
    } else {
        text.to_string()
    };
    let n = (1 << 20) / value.len();
    TestBatch::new(n).compression(codec).encode_with(|rs| {
        for r in rs {
            r.value = Some(Bytes::from(value.clone()));
        }
    })
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("redact_batch_1MiB");
    g.sample_size(20);
    for (name, codec) in [
        ("none", Compression::None),
        ("lz4", Compression::Lz4),
        ("zstd", Compression::Zstd),
    ] {
        for (case, pii, scope) in [
            ("pii", true, "value"),
            ("clean", false, "value"),
            ("pii_json", true, "json:/messages"),
        ] {
            let plan = Plan::compile(Some(RULES), Some(scope)).unwrap().unwrap();
            let b = batch(codec, pii, scope != "value");
            let h = BatchHeader::parse(&b).unwrap();
            g.throughput(Throughput::Bytes(1 << 20));
            g.bench_with_input(BenchmarkId::new(case, name), &b, |bench, b| {
                bench.iter(|| {
                    let mut hits = plan.new_hits();
                    black_box(redact_batch(&plan, &h, b, 64 << 20, &mut hits).unwrap())
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
