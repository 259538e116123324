//! The Confluent wire format of a record value: magic byte 0, the schema id (4 bytes, big
//! endian), then for Protobuf the message indexes (which message of the schema's file, as a
//! path through nested messages: a zigzag varint count, then that many zigzag varints; the
//! single byte 0 means the first message), then the payload.

/// Longest message-index path taken (Confluent's serializers write the nesting depth; a
/// longer one is garbage, and bounding it bounds the allocation).
const MAX_INDEXES: usize = 64;

/// The schema id and the rest of the value.
pub fn header(value: &[u8]) -> Result<(u32, &[u8]), String> {
    match value {
        [0, a, b, c, d, rest @ ..] => Ok((u32::from_be_bytes([*a, *b, *c, *d]), rest)),
        [m, ..] if value.len() >= 5 => Err(format!("magic byte is {m}, not 0")),
        _ => Err(format!(
            "{} bytes, shorter than the 5-byte header",
            value.len()
        )),
    }
}

/// The Protobuf message-index path and the payload after it.
pub fn message_indexes(mut rest: &[u8]) -> Result<(Vec<i32>, &[u8]), String> {
    let count = zigzag(&mut rest)?;
    if count == 0 {
        return Ok((vec![0], rest));
    }
    let count = usize::try_from(count)
        .ok()
        .filter(|&c| c <= MAX_INDEXES)
        .ok_or_else(|| format!("message-index count {count} is out of range"))?;
    let mut path = Vec::with_capacity(count);
    for _ in 0..count {
        let i = zigzag(&mut rest)?;
        let i = i32::try_from(i)
            .ok()
            .filter(|&i| i >= 0)
            .ok_or_else(|| format!("message index {i} is out of range"))?;
        path.push(i);
    }
    Ok((path, rest))
}

/// One zigzag-encoded varint (at most 10 bytes).
fn zigzag(buf: &mut &[u8]) -> Result<i64, String> {
    let mut n: u64 = 0;
    for shift in 0..10 {
        let Some((&b, rest)) = buf.split_first() else {
            return Err("the message indexes end inside a varint".into());
        };
        *buf = rest;
        n |= u64::from(b & 0x7f) << (7 * shift);
        if b & 0x80 == 0 {
            return Ok((n >> 1) as i64 ^ -((n & 1) as i64));
        }
    }
    Err("a message-index varint is longer than 10 bytes".into())
}

/// The zigzag varint bytes of `path` as Confluent's serializers write them (tests, benches).
pub fn encode_indexes(path: &[i32]) -> Vec<u8> {
    fn put(out: &mut Vec<u8>, v: i64) {
        let mut n = ((v << 1) ^ (v >> 63)) as u64;
        loop {
            let b = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }
    let mut out = Vec::new();
    if path == [0] {
        out.push(0);
        return out;
    }
    put(&mut out, path.len() as i64);
    for &i in path {
        put(&mut out, i64::from(i));
    }
    out
}

/// A wire-format value: header, then `payload` (tests, benches).
pub fn frame(id: u32, indexes: Option<&[i32]>, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![0];
    out.extend_from_slice(&id.to_be_bytes());
    if let Some(path) = indexes {
        out.extend(encode_indexes(path));
    }
    out.extend_from_slice(payload);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_a_header_then_id_and_rest() {
        assert_eq!(header(&[0, 0, 0, 1, 2, 9]).unwrap(), (258, &[9][..]));
        assert!(header(&[1, 0, 0, 0, 1])
            .unwrap_err()
            .contains("magic byte is 1"));
        assert!(header(&[0, 0, 0]).unwrap_err().contains("3 bytes"));
        assert!(
            header(b"{\"a\":1}").is_err(),
            "plain JSON is not wire format"
        );
    }

    #[test]
    fn given_message_indexes_then_the_path_confluent_writes() {
        // Confluent: [0] is the single byte 0; [1] is count 1 (zigzag 2), index 1 (zigzag 2).
        assert_eq!(encode_indexes(&[0]), vec![0]);
        assert_eq!(encode_indexes(&[1]), vec![2, 2]);
        assert_eq!(encode_indexes(&[0, 2]), vec![4, 0, 4]);
        for path in [vec![0], vec![1], vec![0, 2], vec![3, 0, 70]] {
            let mut b = encode_indexes(&path);
            b.push(0xAA);
            assert_eq!(message_indexes(&b).unwrap(), (path, &[0xAA][..]));
        }
        assert!(message_indexes(&[2]).is_err(), "count 1, index missing");
        assert!(message_indexes(&[1]).is_err(), "negative count");
        assert!(message_indexes(&[2, 1]).is_err(), "negative index");
        assert!(message_indexes(&[0xff; 11]).is_err(), "endless varint");
    }

    proptest::proptest! {
        /// Bytes from the network: a header or an error, never a panic.
        #[test]
        fn given_any_bytes_then_parsing_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64)) {
            if let Ok((_, rest)) = header(&bytes) {
                if let Ok((path, tail)) = message_indexes(rest) {
                    proptest::prop_assert!(!path.is_empty() && path.len() <= MAX_INDEXES);
                    proptest::prop_assert!(tail.len() < rest.len());
                }
            }
            let _ = message_indexes(&bytes);
        }

        #[test]
        fn given_any_path_then_encoding_round_trips(id in proptest::prelude::any::<u32>(), path in proptest::collection::vec(0..i32::MAX, 1..8)) {
            let v = frame(id, Some(&path), b"p");
            let (got_id, rest) = header(&v).unwrap();
            let (got, tail) = message_indexes(rest).unwrap();
            proptest::prop_assert_eq!((got_id, got, tail), (id, path, &b"p"[..]));
        }
    }
}
