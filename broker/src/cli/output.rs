//! Output: aligned tables for people (tabwriter), JSON for scripts. The JSON shapes are the
//! serde structs of each command, documented in docs/cli.md; the console's API returns the
//! same structs, so a field means the same thing everywhere.

use std::io::Write;

use tabwriter::TabWriter;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned columns.
    Table,
    /// One JSON document (stable field names, see docs/cli.md).
    Json,
}

/// Something a command prints: its JSON form is its serde form, its table is written here.
pub trait Render: serde::Serialize {
    fn table(&self, t: &mut Table);
}

/// Rows of tab-separated cells, aligned when printed; sections are separated by blank lines.
#[derive(Default)]
pub struct Table {
    out: Vec<u8>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn header(&mut self, cells: &[&str]) {
        self.rows
            .push(cells.iter().map(|c| c.to_string()).collect());
    }

    pub fn row<I, S>(&mut self, cells: I)
    where
        I: IntoIterator<Item = S>,
        S: ToString,
    {
        self.rows
            .push(cells.into_iter().map(|c| c.to_string()).collect());
    }

    /// Ends the current block of aligned rows; the next rows align among themselves.
    pub fn section(&mut self) {
        self.flush_rows();
        if !self.out.is_empty() {
            self.out.push(b'\n');
        }
    }

    fn flush_rows(&mut self) {
        if self.rows.is_empty() {
            return;
        }
        let mut tw = TabWriter::new(Vec::new()).padding(2);
        for r in self.rows.drain(..) {
            // A tab or newline inside a cell would break the alignment: show them escaped.
            let cells: Vec<String> = r
                .iter()
                .map(|c| c.replace('\t', "\\t").replace('\n', "\\n"))
                .collect();
            let _ = writeln!(tw, "{}", cells.join("\t"));
        }
        if let Ok(bytes) = tw.into_inner() {
            self.out.extend(bytes);
        }
    }

    pub fn into_string(mut self) -> String {
        self.flush_rows();
        String::from_utf8_lossy(&self.out).into_owned()
    }
}

pub fn render<T: Render>(value: &T, format: Format) -> String {
    match format {
        Format::Json => {
            let mut s = serde_json::to_string_pretty(value).unwrap_or_else(|_| "null".into());
            s.push('\n');
            s
        }
        Format::Table => {
            let mut t = Table::default();
            value.table(&mut t);
            t.into_string()
        }
    }
}

/// Prints to stdout; a closed pipe (`| head`) is not an error worth a message.
pub fn print<T: Render>(value: &T, format: Format) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(render(value, format).as_bytes())?;
    out.flush()
}

/// `-` for a missing value in a table cell.
pub fn or_dash<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "-".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Serialize)]
    struct Two {
        rows: Vec<(String, i64)>,
    }

    impl Render for Two {
        fn table(&self, t: &mut Table) {
            t.header(&["NAME", "COUNT"]);
            for (n, c) in &self.rows {
                t.row([n.clone(), c.to_string()]);
            }
        }
    }

    #[test]
    fn given_rows_of_uneven_width_when_rendered_then_columns_align() {
        let v = Two {
            rows: vec![("a".into(), 1), ("longer-name".into(), 12345)],
        };
        let text = render(&v, Format::Table);
        assert_eq!(
            text,
            "NAME         COUNT\na            1\nlonger-name  12345\n"
        );
        let json: serde_json::Value = serde_json::from_str(&render(&v, Format::Json)).unwrap();
        assert_eq!(json["rows"][1][1], 12345);
    }

    #[test]
    fn given_a_cell_with_a_tab_when_rendered_then_escaped_not_split() {
        let mut t = Table::default();
        t.row(["a\tb", "c"]);
        assert_eq!(t.into_string(), "a\\tb  c\n");
    }
}
