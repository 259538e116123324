//! Test-only crate: the scenarios are in `tests/rdkafka_compat.rs`.
