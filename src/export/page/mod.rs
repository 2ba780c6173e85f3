//! The HTML pages: each one self-contained (no scripts, no external
//! files), its charts inlined as SVG. One file per page: the aggregate's
//! report.html (`agg`), the curve's (`curve`), a mix's (`mix`), a saved
//! single test's (`result`) and a sweep's tables with their heat maps
//! (`sweep`); here, what they share: the head with its style, an SVG made
//! ready to inline, an interval's phase and a figure as a cell.
//!
//! Pages sit above the charts (`super::draw`) and the text exporters: a page
//! embeds both, and neither names a page.

pub mod agg;
pub mod curve;
pub mod mix;
pub mod result;
pub mod sweep;

use std::fmt::Write;

use crate::text::escape_markup;
use crate::warning::Warnings;

/// An SVG document without its XML declaration, for inlining.
pub fn inline(svg: &str) -> &str {
    match svg.find("<svg") {
        Some(i) => &svg[i..],
        None => svg,
    }
}

/// The page's head, its style and its heading.
pub fn head(title: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title>\n<style>\
body{{font-family:sans-serif;margin:2em;color:#222;background:#fff}}\
table{{border-collapse:collapse;margin:1em 0}}td,th{{border:1px solid #999;padding:.3em .6em;text-align:right}}\
tr.peak{{background:#e6f4e6}}tr.saturated{{background:#fbe4e4}}table.provenance th,table.provenance td{{text-align:left}}.warnings{{color:#a00}}svg{{max-width:100%;height:auto}}\
</style></head><body>\n<h1>{title}</h1>\n"
    )
}

/// A result's warnings under their heading; nothing without any.
pub fn warnings(o: &mut String, w: &Warnings) {
    if w.0.is_empty() {
        return;
    }
    o.push_str("<h2>Warnings</h2>\n<ul class=\"warnings\">\n");
    for w in &w.0 {
        let _ = writeln!(o, "<li>{}</li>", escape_markup(&w.message));
    }
    o.push_str("</ul>\n");
}

/// The phase an interval's row names: a mix's own (idle, loaded, drain,
/// recovery) where it has them, else the run's (warmup, measure,
/// cooldown); "measure" for every row of a mix would hide the phase each
/// figure comes from.
pub fn phase_of(iv: &crate::result::Interval) -> &'static str {
    iv.load_phase.map_or(iv.phase.name(), |p| p.name())
}

/// A figure to one decimal, or `n/a`.
pub fn opt(v: Option<f64>) -> String {
    v.map_or("n/a".into(), |v| format!("{v:.1}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inlines_an_svg_without_its_declaration() {
        assert_eq!(inline("<?xml version=\"1.0\"?>\n<svg/>"), "<svg/>");
    }
}
