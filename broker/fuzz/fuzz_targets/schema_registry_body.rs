//! A schema registry request body, as the network gives it: decoded as Confluent's
//! `RegisterSchemaRequest`, its schema parsed as each type, and two parsed schemas compared
//! both ways. Any input must end in a value or an error, never a panic or a hang.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strom::schema_registry::registry::SchemaRequest;
use strom::schema_registry::types::{parse, SchemaType};

fuzz_target!(|data: &[u8]| {
    let Ok(req) = serde_json::from_slice::<SchemaRequest>(data) else {
        // Not a request body: try the bytes as a schema string of each type directly.
        if let Ok(text) = std::str::from_utf8(data) {
            for kind in SchemaType::ALL {
                let _ = parse(kind, text, &[], false);
            }
        }
        return;
    };
    let Some(text) = req.schema.as_deref() else { return };
    for kind in SchemaType::ALL {
        if let Ok(parsed) = parse(kind, text, &[], false) {
            let _ = parsed.read_errors(&parsed);
            if let Ok(again) = parse(kind, parsed.canonical(), &[], false) {
                let _ = again.read_errors(&parsed);
                let _ = parsed.read_errors(&again);
            }
        }
    }
});
