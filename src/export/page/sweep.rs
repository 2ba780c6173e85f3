//! The page of a sweep (`thrum report sweep.json --out DIR`: sweep.html):
//! every 2-D table of the grid as the terminal shows it (the same cells,
//! figures and notes, from [`crate::export::sweep`]), each with its heat
//! map inlined under it.

use std::fmt::Write;

use super::{head, inline};
use crate::export::draw::sweep::svg;
use crate::export::sweep::{cell_texts, headings, tables, view};
use crate::sweep::Sweep;
use crate::text::escape_markup as escape;

/// The sweep's page: per table, its title, the table and its notes, and
/// its heat map.
pub fn report(sw: &Sweep) -> String {
    let mut o = head(&format!(
        "thrum sweep: {} to {}",
        escape(&sw.test),
        escape(&sw.server)
    ));
    let (rows, cols, figs) = view(sw);
    let what = headings(sw, &figs);
    let _ = writeln!(
        o,
        "<p>{} cells; rows {}, columns {}; each cell: {}.{}</p>",
        sw.cells.len(),
        escape(&rows),
        escape(&cols),
        escape(&what.join(", ")),
        if sw.interrupted {
            " Ctrl-C stopped the sweep: the cells it did not reach are missing."
        } else {
            ""
        }
    );
    for t in tables(sw) {
        let _ = writeln!(o, "<h2>{}</h2>", escape(&t.title));
        o.push_str("<table class=\"sweep\">\n<tr><th>");
        o.push_str(&escape(&rows));
        o.push_str("</th>");
        for k in 0..t.col_values.len() {
            let _ = write!(
                o,
                "<th colspan=\"{}\">{}</th>",
                figs.len(),
                escape(&t.col_heading(k))
            );
        }
        o.push_str("</tr>\n");
        if figs.len() > 1 {
            o.push_str("<tr><th></th>");
            for _ in 0..t.col_values.len() {
                for h in &what {
                    let _ = write!(o, "<th>{}</th>", escape(h));
                }
            }
            o.push_str("</tr>\n");
        }
        let mut notes = Vec::new();
        for (r, row) in t.cells.iter().enumerate() {
            let _ = write!(o, "<tr><th>{}</th>", escape(&t.row_values[r]));
            for (k, c) in row.iter().enumerate() {
                for shown in cell_texts(*c, &figs, &t.place(r, k), &mut notes) {
                    let _ = write!(o, "<td>{}</td>", escape(&shown));
                }
            }
            o.push_str("</tr>\n");
        }
        o.push_str("</table>\n");
        if !notes.is_empty() {
            o.push_str("<ol class=\"notes\">\n");
            for n in &notes {
                let _ = writeln!(o, "<li>{}</li>", escape(n));
            }
            o.push_str("</ol>\n");
        }
        o.push_str(inline(&svg(&t)));
        o.push('\n');
    }
    o.push_str("</body></html>\n");
    o
}
