//! Tiered storage's storage half (docs/tiered-storage.md): object keys and tenant isolation
//! (`keys.rs`), the per-partition remote log metadata and its state machine (`manifest.rs`),
//! the object store backends (`store.rs`), and the transfers of one segment's objects
//! (`transfer.rs`), reads of remote segments for fetches with their cache (`read.rs`), and the objects of
//! deleted partitions (`deletions.rs`). What to copy when, and serving Kafka requests from it, is the broker's.

pub mod deletions;
pub mod keys;
pub mod manifest;
pub mod read;
pub mod store;
pub mod transfer;

pub use object_store;
pub use object_store::ObjectStore;
