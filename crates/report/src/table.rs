//! Aligned plain tables (no borders, no colour) for human output, fitted to the layout's
//! width: when the columns do not fit, the widest cells wrap at word boundaries inside their
//! column (comfy-table's dynamic arrangement). Lines carry no trailing spaces.

use std::fmt;
use std::ops::{Deref, DerefMut};

use comfy_table::{presets, CellAlignment, ContentArrangement};

use crate::style;

/// A table that prints fitted to [`style::current`]'s width. Derefs to the comfy-table it
/// wraps, so rows and columns are built with comfy-table's API.
pub struct Table(comfy_table::Table);

impl Deref for Table {
    type Target = comfy_table::Table;
    fn deref(&self) -> &comfy_table::Table {
        &self.0
    }
}

impl DerefMut for Table {
    fn deref_mut(&mut self) -> &mut comfy_table::Table {
        &mut self.0
    }
}

impl Table {
    /// The lines of the table fitted to `width` columns, without trailing spaces.
    pub fn render(&self, width: usize) -> String {
        let mut t = self.0.clone();
        t.set_width(width.min(u16::MAX as usize) as u16);
        t.trim_fmt()
    }
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render(style::current().width))
    }
}

/// A table with a header row, right-aligned numeric columns chosen by the caller.
pub fn new<I, S>(header: I) -> Table
where
    I: IntoIterator<Item = S>,
    S: Into<comfy_table::Cell>,
{
    let mut t = comfy_table::Table::new();
    t.load_style(presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(header);
    Table(t)
}

/// Lets cells wrap so the table fits in `width` columns (long text cells).
pub fn wrap(t: &mut Table, width: u16) {
    t.set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(width);
}

/// Right-aligns the given columns (0-based).
pub fn align_right(t: &mut Table, columns: &[usize]) {
    for &c in columns {
        if let Some(col) = t.column_mut(c) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wide_tables_wrap_inside_their_columns() {
        let mut t = new(["counter", "delta", "meaning"]);
        t.add_row(vec![
            "TcpExtTCPSynRetrans".to_string(),
            "+3".to_string(),
            "SYNs retransmitted because no SYN-ACK came back within the initial RTO, \
             which costs the connecting application one second or more"
                .to_string(),
        ]);
        align_right(&mut t, &[1]);
        let s = t.render(60);
        for l in s.lines() {
            assert!(l.chars().count() <= 60, "{l:?}");
            assert_eq!(l, l.trim_end());
        }
        assert!(s.lines().count() > 2, "{s}");
        assert!(s.contains("TcpExtTCPSynRetrans"), "{s}");
    }
}
