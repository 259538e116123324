//! kcat-style format templates: `%t` topic, `%p` partition, `%o` offset, `%k` key, `%v` (or
//! `%s`) value, `%K`/`%V` key/value length, `%T` timestamp (ms), `%h` headers (`k=v,k2=v2`),
//! `%%` a percent sign; `\n`, `\t`, `\r`, `\\` escapes.
//!
//! `consume` renders records through a template; `produce` parses its input through one: each
//! field runs up to the literal text after it (`%k:%v\n` reads a key up to `:`, a value up to
//! the newline), a field at the end runs to the end of the input.

use std::io::{BufRead, Write};

use super::error::CliError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Topic,
    Partition,
    Offset,
    Key,
    Value,
    KeyLen,
    ValueLen,
    Timestamp,
    Headers,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token {
    Literal(Vec<u8>),
    Field(Field),
}

#[derive(Debug, Clone)]
pub struct Template(pub Vec<Token>);

/// A record as a template sees it (owned bytes: produce builds them, consume copies them).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Rec {
    pub topic: String,
    pub partition: Option<i32>,
    pub offset: Option<i64>,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub timestamp: Option<i64>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

impl Template {
    pub fn parse(s: &str) -> Result<Template, CliError> {
        let mut tokens: Vec<Token> = Vec::new();
        let mut lit: Vec<u8> = Vec::new();
        let mut chars = s.chars().peekable();
        let push_lit = |tokens: &mut Vec<Token>, lit: &mut Vec<u8>| {
            if !lit.is_empty() {
                tokens.push(Token::Literal(std::mem::take(lit)));
            }
        };
        while let Some(c) = chars.next() {
            match c {
                '%' => {
                    let f = match chars.next() {
                        Some('t') => Field::Topic,
                        Some('p') => Field::Partition,
                        Some('o') => Field::Offset,
                        Some('k') => Field::Key,
                        Some('v') | Some('s') => Field::Value,
                        Some('K') => Field::KeyLen,
                        Some('V') | Some('S') => Field::ValueLen,
                        Some('T') => Field::Timestamp,
                        Some('h') => Field::Headers,
                        Some('%') => {
                            lit.push(b'%');
                            continue;
                        }
                        other => {
                            return Err(CliError::Usage(format!(
                                "format {s:?}: unknown field %{}",
                                other.map(String::from).unwrap_or_default()
                            )))
                        }
                    };
                    push_lit(&mut tokens, &mut lit);
                    tokens.push(Token::Field(f));
                }
                '\\' => {
                    let e = match chars.next() {
                        Some('n') => b'\n',
                        Some('t') => b'\t',
                        Some('r') => b'\r',
                        Some('0') => 0,
                        Some('\\') => b'\\',
                        other => {
                            return Err(CliError::Usage(format!(
                                "format {s:?}: unknown escape \\{}",
                                other.map(String::from).unwrap_or_default()
                            )))
                        }
                    };
                    lit.push(e);
                }
                c => {
                    let mut b = [0u8; 4];
                    lit.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
                }
            }
        }
        push_lit(&mut tokens, &mut lit);
        Ok(Template(tokens))
    }

    /// Writes `r` through the template; a missing key or value prints as nothing.
    pub fn render(&self, r: &Rec, out: &mut impl Write) -> std::io::Result<()> {
        for t in &self.0 {
            match t {
                Token::Literal(l) => out.write_all(l)?,
                Token::Field(f) => match f {
                    Field::Topic => out.write_all(r.topic.as_bytes())?,
                    Field::Partition => write!(out, "{}", r.partition.unwrap_or(-1))?,
                    Field::Offset => write!(out, "{}", r.offset.unwrap_or(-1))?,
                    Field::Key => out.write_all(r.key.as_deref().unwrap_or_default())?,
                    Field::Value => out.write_all(r.value.as_deref().unwrap_or_default())?,
                    Field::KeyLen => {
                        write!(out, "{}", r.key.as_ref().map_or(-1, |k| k.len() as i64))?
                    }
                    Field::ValueLen => {
                        write!(out, "{}", r.value.as_ref().map_or(-1, |v| v.len() as i64))?
                    }
                    Field::Timestamp => write!(out, "{}", r.timestamp.unwrap_or(-1))?,
                    Field::Headers => {
                        for (i, (k, v)) in r.headers.iter().enumerate() {
                            if i > 0 {
                                out.write_all(b",")?;
                            }
                            out.write_all(k.as_bytes())?;
                            out.write_all(b"=")?;
                            out.write_all(v.as_deref().unwrap_or_default())?;
                        }
                    }
                },
            }
        }
        Ok(())
    }

    /// Reads the next record from `input`; `None` at a clean end of input. Lengths (`%K`,
    /// `%V`) and offsets are not inputs.
    pub fn read(&self, input: &mut impl BufRead, topic: &str) -> Result<Option<Rec>, CliError> {
        let mut rec = Rec {
            topic: topic.to_string(),
            ..Rec::default()
        };
        let mut started = false;
        let mut i = 0;
        while i < self.0.len() {
            match &self.0[i] {
                Token::Literal(l) => {
                    let mut got = vec![0u8; l.len()];
                    let n = read_up_to(input, &mut got)?;
                    if n == 0 && !started {
                        return Ok(None);
                    }
                    if n < l.len() || &got != l {
                        return Err(CliError::Usage(format!(
                            "input does not match the format: expected {:?}",
                            String::from_utf8_lossy(l)
                        )));
                    }
                    started = true;
                    i += 1;
                }
                Token::Field(f) => {
                    // The field runs to the next literal (consumed with it) or the end.
                    let (bytes, found) = match self.0.get(i + 1) {
                        Some(Token::Literal(delim)) => {
                            let (b, found) = read_until_seq(input, delim)?;
                            i += if found { 2 } else { 1 };
                            (b, found)
                        }
                        Some(Token::Field(_)) => {
                            return Err(CliError::Usage(
                                "format: two fields need text between them to be read".into(),
                            ))
                        }
                        None => {
                            let mut b = Vec::new();
                            input.read_to_end(&mut b)?;
                            if b.is_empty() && !started {
                                // Nothing left: no record (not an empty one, forever).
                                return Ok(None);
                            }
                            i += 1;
                            (b, true)
                        }
                    };
                    if !started && bytes.is_empty() && !found {
                        return Ok(None);
                    }
                    started = true;
                    set_field(&mut rec, *f, bytes)?;
                    if !found {
                        // Input ended inside the record: what was read is the last record.
                        break;
                    }
                }
            }
        }
        Ok(Some(rec))
    }
}

fn set_field(rec: &mut Rec, f: Field, bytes: Vec<u8>) -> Result<(), CliError> {
    let text = || String::from_utf8_lossy(&bytes).trim().to_string();
    let bad = |what: &str| {
        CliError::Usage(format!(
            "input {what} {:?} is not a number",
            String::from_utf8_lossy(&bytes)
        ))
    };
    match f {
        Field::Topic => rec.topic = text(),
        Field::Partition => rec.partition = Some(text().parse().map_err(|_| bad("partition"))?),
        Field::Timestamp => rec.timestamp = Some(text().parse().map_err(|_| bad("timestamp"))?),
        Field::Key => rec.key = Some(bytes),
        Field::Value => rec.value = Some(bytes),
        Field::Headers => {
            for h in String::from_utf8_lossy(&bytes)
                .split(',')
                .filter(|h| !h.is_empty())
            {
                let (k, v) = h.split_once('=').unwrap_or((h, ""));
                rec.headers
                    .push((k.to_string(), Some(v.as_bytes().to_vec())));
            }
        }
        Field::Offset | Field::KeyLen | Field::ValueLen => {
            return Err(CliError::Usage(
                "produce formats cannot read %o, %K or %V".into(),
            ))
        }
    }
    Ok(())
}

fn read_up_to(input: &mut impl BufRead, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match input.read(&mut buf[n..])? {
            0 => break,
            m => n += m,
        }
    }
    Ok(n)
}

/// Bytes up to `delim` (not included; consumed) and whether it was found before the end.
fn read_until_seq(input: &mut impl BufRead, delim: &[u8]) -> std::io::Result<(Vec<u8>, bool)> {
    let last = *delim.last().expect("literal is not empty");
    let mut out = Vec::new();
    loop {
        let n = input.read_until(last, &mut out)?;
        if n == 0 {
            return Ok((out, false));
        }
        if out.ends_with(delim) {
            out.truncate(out.len() - delim.len());
            return Ok((out, true));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn read_all(fmt: &str, input: &[u8]) -> Result<Vec<Rec>, CliError> {
        let t = Template::parse(fmt)?;
        let mut r = std::io::BufReader::new(input);
        let mut out = Vec::new();
        while let Some(rec) = t.read(&mut r, "t")? {
            out.push(rec);
        }
        Ok(out)
    }

    #[test]
    fn given_key_colon_value_lines_when_read_then_one_record_per_line() {
        let recs = read_all("%k:%v\\n", b"k1:hello\nk2:wor:ld\n").unwrap();
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[0].key.as_deref(), Some(&b"k1"[..]));
        assert_eq!(recs[1].value.as_deref(), Some(&b"wor:ld"[..]));
    }

    #[test]
    fn given_a_last_line_without_newline_when_read_then_it_is_a_record() {
        let whole = read_all("%v", b"all of it\n").unwrap();
        assert_eq!(whole.len(), 1);
        assert!(read_all("%v", b"").unwrap().is_empty());
        let recs = read_all("%v\\n", b"a\nb").unwrap();
        assert_eq!(
            recs.iter()
                .map(|r| r.value.clone().unwrap())
                .collect::<Vec<_>>(),
            vec![b"a".to_vec(), b"b".to_vec()]
        );
        assert!(read_all("%v\\n", b"").unwrap().is_empty());
    }

    #[test]
    fn given_partition_headers_and_timestamp_fields_when_read_then_set() {
        let recs = read_all("%p %T %h %v\\n", b"2 1700000000000 a=1,b=2 body\n").unwrap();
        let r = &recs[0];
        assert_eq!(
            (r.partition, r.timestamp),
            (Some(2), Some(1_700_000_000_000))
        );
        assert_eq!(
            r.headers,
            vec![
                ("a".into(), Some(b"1".to_vec())),
                ("b".into(), Some(b"2".to_vec()))
            ]
        );
        assert!(read_all("%p %v\\n", b"x body\n").is_err());
    }

    #[test]
    fn given_records_when_rendered_then_fields_in_place() {
        let t = Template::parse("%t/%p@%o %k=%v (%K,%V) %h %%\\n").unwrap();
        let r = Rec {
            topic: "t".into(),
            partition: Some(1),
            offset: Some(7),
            key: None,
            value: Some(b"v".to_vec()),
            timestamp: Some(5),
            headers: vec![("h".into(), Some(b"x".to_vec()))],
        };
        let mut out = Vec::new();
        t.render(&r, &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "t/1@7 =v (-1,1) h=x %\n");
    }

    #[test]
    fn given_bad_templates_when_parsed_then_usage_errors() {
        for f in ["%x", "%", "\\q", "abc\\"] {
            assert!(Template::parse(f).is_err(), "{f}");
        }
        assert!(read_all("%k%v", b"ab").is_err());
    }

    proptest! {
        /// What `consume` renders with a template, `produce` reads back with it, as long as
        /// the delimiters do not occur inside the fields.
        #[test]
        fn rendered_records_read_back(recs in proptest::collection::vec(("[a-z0-9]{0,8}", "[a-z0-9 ]{0,20}"), 1..20)) {
            let t = Template::parse("%k\\t%v\\n").unwrap();
            let mut buf = Vec::new();
            for (k, v) in &recs {
                let r = Rec { key: Some(k.as_bytes().to_vec()), value: Some(v.as_bytes().to_vec()), ..Rec::default() };
                t.render(&r, &mut buf).unwrap();
            }
            let back = read_all("%k\\t%v\\n", &buf).unwrap();
            prop_assert_eq!(back.len(), recs.len());
            for (b, (k, v)) in back.iter().zip(&recs) {
                prop_assert_eq!(b.key.as_deref(), Some(k.as_bytes()));
                prop_assert_eq!(b.value.as_deref(), Some(v.as_bytes()));
            }
        }

        /// Arbitrary input never panics the reader.
        #[test]
        fn arbitrary_input_never_panics(input in proptest::collection::vec(any::<u8>(), 0..200)) {
            for f in ["%k:%v\\n", "%p %v\\n", "%v", "[%h]%k\\n"] {
                let _ = read_all(f, &input);
            }
        }
    }
}
