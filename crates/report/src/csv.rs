//! CSV output through serde: one header row from the record's field names, then one row per
//! record. Records must be flat (numbers, strings, booleans, options, unit enums).

use std::io::{self, Write};

use serde::Serialize;

/// Writes `rows` as CSV with a header row.
pub fn write<W, T, I>(w: &mut W, rows: I) -> io::Result<()>
where
    W: Write + ?Sized,
    T: Serialize,
    I: IntoIterator<Item = T>,
{
    let mut out = ::csv::Writer::from_writer(w);
    for r in rows {
        out.serialize(r).map_err(into_io)?;
    }
    out.flush()
}

fn into_io(e: ::csv::Error) -> io::Error {
    match e.into_kind() {
        ::csv::ErrorKind::Io(e) => e,
        other => io::Error::other(format!("{other:?}")),
    }
}

#[cfg(test)]
mod tests {
    #[derive(serde::Serialize)]
    #[serde(rename_all = "snake_case")]
    enum Cause {
        DataRto,
    }

    #[derive(serde::Serialize)]
    struct Row {
        start_us: u64,
        cause: Option<Cause>,
        note: &'static str,
    }

    #[test]
    fn header_then_rows_quoted_where_needed() {
        let mut out = Vec::new();
        super::write(
            &mut out,
            [
                Row {
                    start_us: 5,
                    cause: Some(Cause::DataRto),
                    note: "a, b",
                },
                Row {
                    start_us: 9,
                    cause: None,
                    note: "",
                },
            ],
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "start_us,cause,note\n5,data_rto,\"a, b\"\n9,,\n"
        );
    }
}
