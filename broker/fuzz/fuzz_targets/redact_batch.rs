//! PII redaction of a produced batch (`strom::partition::redact::redact_batch`), as a client
//! sends it: the input is a record batch (header and records, any codec bits), rewritten with
//! every built-in rule set over the value, a header and a JSON pointer. Any input must end in
//! a batch or an error, never a panic; a rewritten batch must parse again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strom::partition::redact::redact_batch;
use strom::redact::Plan;

fuzz_target!(|data: &[u8]| {
    let Ok(header) = storage::batch::BatchHeader::parse(data) else {
        return;
    };
    let plan = Plan::compile(
        Some("cn_id,phone,email,card,ip"),
        Some("value,header:h,json:/a"),
    )
    .expect("built-in rules compile")
    .expect("rules named");
    let mut hits = plan.new_hits();
    if let Ok(Some((_, out))) = redact_batch(&plan, &header, data, 1 << 20, &mut hits) {
        assert!(storage::batch::BatchHeader::parse(&out).is_ok());
    }
});
