//! The demo's tables, aligned as kubectl prints them.

use std::fmt::Write as _;

/// `header` and `rows` as columns padded to their widest cell, as kubectl prints tables.
pub(super) fn aligned<const N: usize>(header: [&str; N], rows: &[[String; N]]) -> String {
    let header = header.map(str::to_owned);
    let mut widths = header.clone().map(|h| h.len());
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.len());
        }
    }
    let mut text = String::new();
    for row in std::iter::once(&header).chain(rows) {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        let _ = writeln!(text, "{}", cells.join("   ").trim_end());
    }
    text
}
