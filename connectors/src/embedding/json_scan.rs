//! The fast path of [`super::json_pointer::vector_at`]: one pass over the bytes, no serde
//! machinery, for the documents embedding producers send (objects, arrays, plain strings,
//! decimal numbers). Profiling the serde path (benches/README.md, "Instructions per
//! record") put ~150 instructions on each vector element — the deserializer's per-call
//! dispatch, its peek/eat per byte and its general float parser — for numbers that are
//! mostly `0.012345`-shaped. Here an element costs its digits and one multiply or divide.
//!
//! It answers `None` ("ask serde") whenever it is not sure, so a document is accepted or
//! refused exactly as by serde_json, and every error message is serde_json's:
//! - any syntax error, trailing bytes, or nesting deeper than [`MAX_DEPTH`] (serde_json
//!   refuses beyond 128);
//! - a string with a `\u` escape of a surrogate (serde_json checks pairing), a control
//!   character, invalid UTF-8, or an object key with any escape;
//! - a pointer with `~` escapes or more than [`MAX_TOKENS`] steps;
//! - a number that is infinite as f64 (serde_json refuses those: NumberOutOfRange).
//!
//! Numbers are exactly serde_json's. Clinger's fast path (a significand ≤ 2⁵³ times or
//! divided by an exact power of ten ≤ 10²² is one correctly rounded operation) covers the
//! numbers embeddings are made of, and serde_json's `float_roundtrip` parser (on in this
//! workspace) answers the correctly rounded value there too; every other number is handed
//! to serde_json's own parser. The property tests in `tests.rs` compare to the bit.

use super::json_pointer::{index, Found};
use super::Stats;

/// Deepest nesting the fast path follows (serde_json's own limit is 128).
const MAX_DEPTH: u32 = 64;
/// Most pointer steps the fast path keeps on the stack.
const MAX_TOKENS: usize = 8;

/// The vector at `pointer` in `doc`, or `None` when serde_json must decide.
pub(super) fn vector_at(doc: &[u8], pointer: &str) -> Option<Found> {
    let mut tokens = [""; MAX_TOKENS];
    let mut n = 0;
    let walk_pointer = if pointer.is_empty() {
        true
    } else if let Some(path) = pointer.strip_prefix('/') {
        if path.contains('~') {
            return None;
        }
        for t in path.split('/') {
            *tokens.get_mut(n)? = t;
            n += 1;
        }
        true
    } else {
        false
    };
    let mut scan = Scan { b: doc, i: 0 };
    scan.ws();
    let found = if walk_pointer {
        scan.walk(&tokens[..n], 0)?
    } else {
        // `Value::pointer` finds nothing there; the document must still be JSON.
        scan.skip(0)?;
        Found::Missing
    };
    scan.ws();
    (scan.i == doc.len()).then_some(found)
}

/// Byte classes inside a string: 0 = plain, 1 = ends the plain run (`"`, `\`, a control
/// character), 2 = not ASCII (checked as UTF-8 with the run).
static STRING_CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = if i < 0x20 || i == b'"' as usize || i == b'\\' as usize {
            1
        } else if i >= 0x80 {
            2
        } else {
            0
        };
        i += 1;
    }
    t
};

struct Scan<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Scan<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    /// JSON's whitespace, as serde_json reads it.
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.peek()? == c).then(|| self.i += 1)
    }

    /// The value at the rest of the pointer, inside the value at `i` (whitespace eaten).
    fn walk(&mut self, tokens: &[&str], depth: u32) -> Option<Found> {
        let Some((token, rest)) = tokens.split_first() else {
            return self.vector(depth);
        };
        match self.peek()? {
            b'{' => {
                let mut found = Found::Missing;
                self.object(depth, |scan, key| {
                    if key == token.as_bytes() {
                        // Of duplicate keys the last counts, as in a `Value` map.
                        found = scan.walk(rest, depth + 1)?;
                    } else {
                        scan.skip(depth + 1)?;
                    }
                    Some(())
                })?;
                Some(found)
            }
            b'[' => {
                let want = index(token);
                let mut found = Found::Missing;
                self.array(depth, |scan, i| {
                    if want == Some(i) {
                        found = scan.walk(rest, depth + 1)?;
                    } else {
                        scan.skip(depth + 1)?;
                    }
                    Some(())
                })?;
                Some(found)
            }
            _ => self.skip(depth).map(|()| Found::Missing),
        }
    }

    /// The value the pointer names: an array of numbers, folded into `Stats` in order as
    /// the serde path folds them (each number as f64, then as f32).
    fn vector(&mut self, depth: u32) -> Option<Found> {
        if self.peek()? != b'[' {
            return self.skip(depth).map(|()| Found::NotArray);
        }
        let mut stats = Stats::default();
        let mut not_number = None;
        self.array(depth, |scan, i| {
            match scan.peek()? {
                b'-' | b'0'..=b'9' => {
                    let f = scan.number()? as f32;
                    if not_number.is_none() {
                        if !f.is_finite() && stats.first_non_finite.is_none() {
                            stats.first_non_finite = Some(i);
                        }
                        stats.sum_squares += f as f64 * f as f64;
                    }
                }
                _ => {
                    not_number.get_or_insert(i);
                    scan.skip(depth + 1)?;
                }
            }
            stats.len = i + 1;
            Some(())
        })?;
        Some(match not_number {
            Some(i) => Found::NotNumber(i),
            None => Found::Vector(stats),
        })
    }

    /// Any value, checked and dropped.
    fn skip(&mut self, depth: u32) -> Option<()> {
        match self.peek()? {
            b'{' => self.object(depth, |scan, _| scan.skip(depth + 1)),
            b'[' => self.array(depth, |scan, _| scan.skip(depth + 1)),
            b'"' => self.string().map(drop),
            b'-' | b'0'..=b'9' => self.number().map(drop),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => None,
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.i + word.len();
        (self.b.get(self.i..end)? == word).then(|| self.i = end)
    }

    /// An object at `i`; `member` is called with each key, at its value.
    fn object(
        &mut self,
        depth: u32,
        mut member: impl FnMut(&mut Self, &'a [u8]) -> Option<()>,
    ) -> Option<()> {
        if depth >= MAX_DEPTH {
            return None;
        }
        self.i += 1;
        self.ws();
        if self.eat(b'}').is_some() {
            return Some(());
        }
        loop {
            let key = self.string()?;
            if key.contains(&b'\\') {
                return None;
            }
            self.ws();
            self.eat(b':')?;
            self.ws();
            member(self, key)?;
            self.ws();
            match self.peek()? {
                b',' => {
                    self.i += 1;
                    self.ws();
                }
                b'}' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// An array at `i`; `element` is called with each index, at its value.
    fn array(
        &mut self,
        depth: u32,
        mut element: impl FnMut(&mut Self, usize) -> Option<()>,
    ) -> Option<()> {
        if depth >= MAX_DEPTH {
            return None;
        }
        self.i += 1;
        self.ws();
        if self.eat(b']').is_some() {
            return Some(());
        }
        let mut n = 0;
        loop {
            element(self, n)?;
            n += 1;
            self.ws();
            match self.peek()? {
                b',' => {
                    self.i += 1;
                    self.ws();
                }
                b']' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// A string at `i`: its raw bytes between the quotes (escapes left as they are).
    fn string(&mut self) -> Option<&'a [u8]> {
        if self.peek()? != b'"' {
            return None;
        }
        let start = self.i + 1;
        let mut i = start;
        let mut ascii = true;
        loop {
            let c = *self.b.get(i)?;
            match STRING_CLASS[c as usize] {
                0 => i += 1,
                2 => {
                    ascii = false;
                    i += 1;
                }
                _ if c == b'"' => break,
                _ if c == b'\\' => i = self.escape(i + 1)?,
                _ => return None, // a control character
            }
        }
        let raw = &self.b[start..i];
        if !ascii && std::str::from_utf8(raw).is_err() {
            return None;
        }
        self.i = i + 1;
        Some(raw)
    }

    /// The escape after the `\` at `i - 1`: where the string goes on.
    fn escape(&self, i: usize) -> Option<usize> {
        match *self.b.get(i)? {
            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Some(i + 1),
            b'u' => {
                let hex = self.b.get(i + 1..i + 5)?;
                let mut code = 0u32;
                for &h in hex {
                    code = code * 16 + (h as char).to_digit(16)?;
                }
                // Surrogates must pair up: serde_json decides.
                (!(0xD800..=0xDFFF).contains(&code)).then_some(i + 5)
            }
            _ => None,
        }
    }

    /// A number at `i`, by JSON's grammar, as serde_json reads it into f64.
    fn number(&mut self) -> Option<f64> {
        let start = self.i;
        let negative = self.eat(b'-').is_some();
        let mut significand: u64 = 0;
        // Significant digits read, and whether some did not fit (then `str::parse`).
        let mut digits = 0u32;
        let mut long = false;
        let mut exponent: i64 = 0;
        let mut digit = |scan: &mut Self, fraction: bool| -> bool {
            let Some(c @ b'0'..=b'9') = scan.peek() else {
                return false;
            };
            scan.i += 1;
            if digits < 19 {
                significand = significand * 10 + (c - b'0') as u64;
                if significand != 0 {
                    digits += 1;
                }
                exponent -= fraction as i64;
            } else {
                long = true;
            }
            true
        };
        match self.peek()? {
            b'0' => {
                self.i += 1;
                if let Some(b'0'..=b'9') = self.peek() {
                    return None; // a leading zero
                }
            }
            b'1'..=b'9' => while digit(self, false) {},
            _ => return None,
        }
        if self.eat(b'.').is_some() {
            if !digit(self, true) {
                return None;
            }
            while digit(self, true) {}
        }
        let mut exact = !long;
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            let negative_exp = match self.peek()? {
                b'-' => {
                    self.i += 1;
                    true
                }
                b'+' => {
                    self.i += 1;
                    false
                }
                _ => false,
            };
            let mut e: i64 = 0;
            let first = self.i;
            while let Some(c @ b'0'..=b'9') = self.peek() {
                self.i += 1;
                e = (e * 10 + (c - b'0') as i64).min(1 << 40);
            }
            if self.i == first {
                return None;
            }
            exponent += if negative_exp { -e } else { e };
            exact &= e < 1 << 40;
        }
        if !exact || significand > 1 << 53 || !(-22..=22).contains(&exponent) {
            // serde_json's own parser for the rest: it is not always the correctly rounded
            // value (`4e-271` is one ulp above `str::parse`'s), and the verdicts must be
            // serde_json's. It refuses what is beyond f64.
            return serde_json::from_slice::<f64>(&self.b[start..self.i]).ok();
        }
        let f = if exponent >= 0 {
            significand as f64 * POW10[exponent as usize]
        } else {
            significand as f64 / POW10[-exponent as usize]
        };
        Some(if negative { -f } else { f })
    }
}

/// The powers of ten that are exact in f64.
const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// One number alone, as the scan reads it (tests compare it with serde_json to the bit).
#[cfg(test)]
pub(super) fn number_of(text: &str) -> Option<f64> {
    let mut scan = Scan {
        b: text.as_bytes(),
        i: 0,
    };
    let f = scan.number()?;
    (scan.i == text.len()).then_some(f)
}
