//! What Milvus accepts as names and consistency levels: pure rules, kept apart from the sink
//! so that the config can check a file at load without importing the sink (and the sink's
//! config import does not run back).

use milvus::v2::prelude::ConsistencyLevel;

/// The primary key field: our deterministic ids.
pub(super) const ID_FIELD: &str = "id";

/// Milvus's names for the configured consistency levels (case-insensitive).
pub fn consistency_level(s: &str) -> Option<ConsistencyLevel> {
    Some(match s.to_ascii_lowercase().as_str() {
        "strong" => ConsistencyLevel::Strong,
        "session" => ConsistencyLevel::Session,
        "bounded" => ConsistencyLevel::Bounded,
        "eventually" => ConsistencyLevel::Eventually,
        _ => return None,
    })
}

/// Whether `name` is a valid Milvus collection or field name: a letter or `_`, then letters,
/// digits and `_`, at most 255 bytes.
pub fn valid_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    let first_ok = bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_');
    first_ok && name.len() <= 255 && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Whether a record field gets a typed Milvus field: a valid name, not one of the fields the
/// connector itself defines. Other record fields go into the dynamic field.
pub fn typed_field_name(name: &str, vector_field: &str) -> bool {
    valid_name(name) && name != ID_FIELD && name != vector_field
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_names_and_levels_then_validity() {
        assert!(valid_name("documents") && valid_name("_x1"));
        for bad in ["", "1abc", "a-b", "a b", &"x".repeat(256)] {
            assert!(!valid_name(bad), "{bad}");
        }
        assert!(!typed_field_name("id", "emb") && !typed_field_name("emb", "emb"));
        assert!(typed_field_name("title", "emb"));
        assert_eq!(consistency_level("STRONG"), Some(ConsistencyLevel::Strong));
        assert_eq!(consistency_level("QUORUM"), None);
    }
}
