//! Kafka's primitive types (`protocol/types` in Kafka's clients) for the hand-derived
//! messages of this module: kafka-protocol's own encoders are crate-private. Every read is
//! bounds-checked and fails with an error, never a panic.

use anyhow::{anyhow, bail, Result};
use bytes::{Buf, BufMut, Bytes};
use kafka_protocol::protocol::StrBytes;

pub fn i8<B: Buf>(b: &mut B) -> Result<i8> {
    b.try_get_i8().map_err(|_| anyhow!("truncated int8"))
}
pub fn i16<B: Buf>(b: &mut B) -> Result<i16> {
    b.try_get_i16().map_err(|_| anyhow!("truncated int16"))
}
pub fn i32<B: Buf>(b: &mut B) -> Result<i32> {
    b.try_get_i32().map_err(|_| anyhow!("truncated int32"))
}
pub fn i64<B: Buf>(b: &mut B) -> Result<i64> {
    b.try_get_i64().map_err(|_| anyhow!("truncated int64"))
}
pub fn bool<B: Buf>(b: &mut B) -> Result<bool> {
    Ok(b.try_get_u8().map_err(|_| anyhow!("truncated bool"))? != 0)
}
pub fn uuid<B: Buf>(b: &mut B) -> Result<uuid::Uuid> {
    Ok(uuid::Uuid::from_u128(
        b.try_get_u128().map_err(|_| anyhow!("truncated uuid"))?,
    ))
}

pub fn uvarint<B: Buf>(b: &mut B) -> Result<u32> {
    let mut value: u32 = 0;
    for i in 0..5 {
        let byte = b.try_get_u8().map_err(|_| anyhow!("truncated varint"))?;
        value |= u32::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    bail!("varint longer than 5 bytes")
}

pub fn put_uvarint<B: BufMut>(b: &mut B, mut v: u32) {
    while v >= 0x80 {
        b.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    b.put_u8(v as u8);
}

pub fn uvarint_size(mut v: u32) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

fn take<B: Buf>(b: &mut B, len: usize) -> Result<Bytes> {
    if b.remaining() < len {
        bail!("{len} bytes announced, {} left", b.remaining());
    }
    Ok(b.copy_to_bytes(len))
}

fn utf8(bytes: Bytes) -> Result<StrBytes> {
    StrBytes::from_utf8(bytes).map_err(|e| anyhow!("string is not UTF-8: {e}"))
}

/// A length below 0 (classic) or a varint 0 (compact) is null.
fn str_len<B: Buf>(b: &mut B, flexible: bool) -> Result<Option<usize>> {
    if flexible {
        let n = uvarint(b)?;
        Ok(n.checked_sub(1).map(|n| n as usize))
    } else {
        let n = i16(b)?;
        Ok((n >= 0).then_some(n as usize))
    }
}

pub fn nullable_string<B: Buf>(b: &mut B, flexible: bool) -> Result<Option<StrBytes>> {
    match str_len(b, flexible)? {
        None => Ok(None),
        Some(len) => Ok(Some(utf8(take(b, len)?)?)),
    }
}

pub fn string<B: Buf>(b: &mut B, flexible: bool) -> Result<StrBytes> {
    nullable_string(b, flexible)?.ok_or_else(|| anyhow!("null for a non-nullable string"))
}

pub fn put_nullable_string<B: BufMut>(b: &mut B, s: Option<&str>, flexible: bool) {
    match (s, flexible) {
        (None, true) => put_uvarint(b, 0),
        (None, false) => b.put_i16(-1),
        (Some(s), true) => {
            put_uvarint(b, s.len() as u32 + 1);
            b.put_slice(s.as_bytes());
        }
        (Some(s), false) => {
            b.put_i16(s.len() as i16);
            b.put_slice(s.as_bytes());
        }
    }
}

pub fn put_string<B: BufMut>(b: &mut B, s: &str, flexible: bool) {
    put_nullable_string(b, Some(s), flexible)
}

pub fn nullable_string_size(s: Option<&str>, flexible: bool) -> usize {
    match (s, flexible) {
        (None, true) => 1,
        (None, false) => 2,
        (Some(s), true) => uvarint_size(s.len() as u32 + 1) + s.len(),
        (Some(s), false) => 2 + s.len(),
    }
}

pub fn string_size(s: &str, flexible: bool) -> usize {
    nullable_string_size(Some(s), flexible)
}

/// An array's length; null (classic -1, compact 0) is read as empty, as the non-nullable
/// arrays of the messages here are.
pub fn array_len<B: Buf>(b: &mut B, flexible: bool) -> Result<usize> {
    Ok(nullable_array_len(b, flexible)?.unwrap_or(0))
}

/// A nullable array's length: classic -1 or compact 0 is `None`.
pub fn nullable_array_len<B: Buf>(b: &mut B, flexible: bool) -> Result<Option<usize>> {
    let Some(n) = length_or_null(b, flexible)? else {
        return Ok(None);
    };
    // Each element takes at least a byte: a length beyond what is left is a lie, and must not
    // become an allocation.
    if n > b.remaining() {
        bail!("array of {n} elements in {} bytes", b.remaining());
    }
    Ok(Some(n))
}

pub fn put_array_len<B: BufMut>(b: &mut B, n: usize, flexible: bool) {
    if flexible {
        put_uvarint(b, n as u32 + 1);
    } else {
        b.put_i32(n as i32);
    }
}

pub fn array_len_size(n: usize, flexible: bool) -> usize {
    if flexible {
        uvarint_size(n as u32 + 1)
    } else {
        4
    }
}

pub fn u16<B: Buf>(b: &mut B) -> Result<u16> {
    b.try_get_u16().map_err(|_| anyhow!("truncated uint16"))
}

pub fn f64<B: Buf>(b: &mut B) -> Result<f64> {
    b.try_get_f64().map_err(|_| anyhow!("truncated float64"))
}

/// Bytes with a length (classic int32, compact uvarint + 1); null as strings are.
pub fn nullable_bytes<B: Buf>(b: &mut B, flexible: bool) -> Result<Option<Bytes>> {
    match length_or_null(b, flexible)? {
        None => Ok(None),
        Some(len) => take(b, len).map(Some),
    }
}

/// An array's or a byte string's length: compact (uvarint + 1, 0 is null) or classic (int32,
/// negative is null).
fn length_or_null<B: Buf>(b: &mut B, flexible: bool) -> Result<Option<usize>> {
    Ok(if flexible {
        uvarint(b)?.checked_sub(1).map(|n| n as usize)
    } else {
        let n = i32(b)?;
        (n >= 0).then_some(n as usize)
    })
}

pub fn put_nullable_bytes<B: BufMut>(b: &mut B, bytes: Option<&Bytes>, flexible: bool) {
    match (bytes, flexible) {
        (None, true) => put_uvarint(b, 0),
        (None, false) => b.put_i32(-1),
        (Some(x), true) => {
            put_uvarint(b, x.len() as u32 + 1);
            b.put_slice(x);
        }
        (Some(x), false) => {
            b.put_i32(x.len() as i32);
            b.put_slice(x);
        }
    }
}

pub fn put_null_array<B: BufMut>(b: &mut B, flexible: bool) {
    if flexible {
        put_uvarint(b, 0);
    } else {
        b.put_i32(-1);
    }
}
