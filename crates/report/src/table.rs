//! Aligned plain tables (no borders, no colour) for human output.

pub use comfy_table::Table;
use comfy_table::{presets, CellAlignment, ContentArrangement};

/// A table with a header row, right-aligned numeric columns chosen by the caller.
pub fn new<I, S>(header: I) -> Table
where
    I: IntoIterator<Item = S>,
    S: Into<comfy_table::Cell>,
{
    let mut t = Table::new();
    t.load_style(presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(header);
    t
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
